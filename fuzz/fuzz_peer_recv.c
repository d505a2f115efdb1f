// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_peer_recv.c - the tcp:// source (source/peer.c, peer_link.c) facing
 * a sender whose bytes are the input: the open (WELCOME or ERROR, the
 * sizes offered), the stream dial, and the DATA, ERROR and DONE messages
 * on both connections; then a few reads of what was received.
 *
 * Input: bytes 0-1 (little-endian) are the length of the demand
 * connection's part; the rest is the stream connection's.
 *
 * Decision: the source dials HOST:PORT itself, so the sender is a thread
 * of this harness on 127.0.0.1: a listener per input, closed once both
 * connections are in (a redial is refused and, with retry_ms=0, the source
 * gives up at once).  Each connection gets its whole part when accepted;
 * both are closed once the process is quiet - every other thread asleep
 * in a futex or a sleep, or in recv() with nothing queued
 * (/proc/self/task/N/syscall), and all sent bytes acknowledged - so no
 * read waits for its timeout and a crash reproduces.  Offers of more than
 * 2^16 blocks that the receiver would take are skipped: its state and
 * bitmap are O(blocks), the same code at a second an input (the refusals
 * above PEER_MAX_BLOCKS and PEER_MAX_SIZE are still fuzzed).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "faultline.h"
#include "source/impl.h"
#include "source/peer_proto.h"
#include "source/source.h"

#define INPUT_MAX	(64 << 10)	/* fits the socket buffers */

struct sender {
	int lfd;
	const uint8_t *part[2];	/* demand, stream */
	size_t len[2];
	atomic_int want;	/* connections: 1 in the open, then 2 or 0 */
};

/* A WELCOME offering 2^16 or more blocks, fewer than PEER_MAX_BLOCKS? */
static bool too_slow(const uint8_t *b, size_t len)
{
	struct peer_hdr h;
	struct peer_hello w;

	if (len < sizeof(h) + sizeof(w))
		return false;
	memcpy(&h, b, sizeof(h));
	memcpy(&w, b + sizeof(h), sizeof(w));
	uint64_t size = le64toh(w.size), bs = le32toh(w.block_size);

	if (le16toh(h.type) != PEER_WELCOME || bs < PEER_MIN_BLOCK ||
	    bs > PEER_MAX_BLOCK || (bs & (bs - 1)) || size > PEER_MAX_SIZE)
		return false;
	return size / bs >= (1u << 16) && size / bs < PEER_MAX_BLOCKS;
}

/* Every thread but self asleep, and none of them on bytes that are queued? */
static bool quiet(pid_t self)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	bool yes = d != NULL;

	while (yes && (e = readdir(d))) {
		char path[64];
		unsigned long a0;
		long nr;
		int n;
		FILE *f;

		if (e->d_name[0] == '.' || atoi(e->d_name) == self)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/syscall",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;	/* gone */
		if (fscanf(f, "%ld %lx", &nr, &a0) != 2)	/* "running" */
			yes = false;
		else if (nr == SYS_recvfrom)
			yes = ioctl((int)a0, FIONREAD, &n) == 0 && n == 0;
		else
			yes = nr == SYS_futex || nr == SYS_nanosleep ||
			      nr == SYS_clock_nanosleep;
		fclose(f);
	}
	if (d)
		closedir(d);
	return yes;
}

static bool acked(const int *fd)
{
	int n;

	for (int i = 0; i < 2; i++)
		if (fd[i] >= 0 && (ioctl(fd[i], SIOCOUTQ, &n) < 0 || n))
			return false;
	return true;
}

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	int fd[2] = { -1, -1 }, n = 0;
	pid_t self = gettid();
	char buf[16384];

	for (;;) {
		struct pollfd p[3] = { { n < 2 ? s->lfd : -1, POLLIN, 0 },
				       { fd[0], POLLIN, 0 },
				       { fd[1], POLLIN, 0 } };
		struct timespec tick = { 0, 50000 };
		bool busy = ppoll(p, 3, &tick, NULL) > 0;

		if (p[0].revents &&
		    (fd[n] = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
			if (send(fd[n], s->part[n], s->len[n], MSG_NOSIGNAL) !=
			    (ssize_t)s->len[n])
				abort();
			if (++n == 2)
				shutdown(s->lfd, SHUT_RDWR);	/* no redial */
		}
		for (int i = 0; i < 2; i++) {	/* HELLOs, REQs: dropped */
			if (!p[1 + i].revents ||
			    read(fd[i], buf, sizeof(buf)) > 0)
				continue;
			close(fd[i]);
			fd[i] = -1;
		}
		if (!busy && n >= atomic_load(&s->want) && acked(fd) &&
		    quiet(self))
			break;
	}
	for (int i = 0; i < 2; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	return NULL;
}

/* Until the source has seen the connections end (or has everything). */
static void wait_settled(struct fl_source *src)
{
	struct peer_stats st;

	for (int i = 0; i < 20000; i++) {
		if (source_peer_stats(src, &st) < 0 || st.dead ||
		    st.blocks_have == st.nblocks)
			return;
		usleep(100);
	}
	abort();	/* a hang: 2 s after both connections closed */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct fl_source *src = NULL;
	struct sender s = { .want = 1 };
	char spec[64], buf[4096];
	pthread_t t;

	if (size < 2 || size > INPUT_MAX)
		return 0;
	size_t dlen = data[0] | (size_t)data[1] << 8;

	if (dlen > size - 2)
		dlen = size - 2;
	if (too_slow(data + 2, dlen))
		return 0;
	s.part[0] = data + 2;
	s.len[0] = dlen;
	s.part[1] = data + 2 + dlen;
	s.len[1] = size - 2 - dlen;
	s.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s.lfd < 0 || bind(s.lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(s.lfd, 4) < 0 ||
	    getsockname(s.lfd, (struct sockaddr *)&a, &alen) < 0 ||
	    pthread_create(&t, NULL, sender_main, &s))
		abort();
	snprintf(spec, sizeof(spec), "tcp://127.0.0.1:%u?retry_ms=0",
		 ntohs(a.sin_port));
	atomic_store(&s.want, source_peer_open(spec, NULL, &src) == 0 ? 2 : 0);
	pthread_join(t, NULL);
	close(s.lfd);
	if (src) {
		uint64_t end = fl_source_size(src);
		size_t len = end < sizeof(buf) ? (size_t)end : sizeof(buf);

		wait_settled(src);
		src->ops->read(src, buf, len, 0);
		src->ops->read(src, buf, len, end - len);
		src->ops->hole(src, 0, len);
		fl_source_put(src);
	}
	return 0;
}
