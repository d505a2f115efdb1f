// SPDX-License-Identifier: Apache-2.0
/*
 * peer_bad.c - a tcp:// receiver facing a sender that lies: a WELCOME
 * claiming more memory than a receiver takes is refused with a one-line
 * error before anything is allocated for it, and an ERROR whose block
 * count wraps fails the read it answers, nothing else.
 *
 * Decision: the sender is a thread of the test speaking the protocol of
 * peer_proto.h on 127.0.0.1, so each lie is exactly one field.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "faultline.h"
#include "source/peer_proto.h"
#include "source/source.h"
#include "tap.h"

struct liar {
	int lfd;
	uint16_t port;
	uint64_t size;		/* WELCOME: size and block size */
	uint32_t bsize;
	bool wrap_error;	/* answer each REQ with ERROR [a, a + 2^64-1) */
	pthread_t th;
};

static int recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_msg(int fd, uint16_t type, uint64_t a, uint64_t b,
		    const void *body, uint32_t len)
{
	struct peer_hdr h = { .type = htole16(type), .len = htole32(len),
			      .a = htole64(a), .b = htole64(b) };

	if (send(fd, &h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h))
		return -1;
	return len && send(fd, body, len, MSG_NOSIGNAL) != (ssize_t)len ?
	       -1 : 0;
}

/* One connection: HELLO -> WELCOME with the lie, then REQs (demand). */
static void *liar_conn(void *arg)
{
	struct liar *l = *(struct liar **)arg;
	int fd = (int)(intptr_t)((struct liar **)arg)[1];
	struct peer_hdr h;
	struct peer_hello hi;
	char skip[4096];

	free(arg);
	if (recv_all(fd, &h, sizeof(h)) || le32toh(h.len) < sizeof(hi) ||
	    recv_all(fd, &hi, sizeof(hi)))
		goto out;
	for (uint32_t rest = le32toh(h.len) - sizeof(hi); rest;) {
		uint32_t n = rest < sizeof(skip) ? rest : sizeof(skip);

		if (recv_all(fd, skip, n))	/* a stream HELLO's bitmap */
			goto out;
		rest -= n;
	}
	hi.size = htole64(l->size);
	hi.block_size = htole32(l->bsize);
	hi.file_id = htole64(0x1234);
	if (send_msg(fd, PEER_WELCOME, 0, 0, &hi, sizeof(hi)))
		goto out;
	while (recv_all(fd, &h, sizeof(h)) == 0) {
		if (le16toh(h.type) == PEER_REQ && l->wrap_error &&
		    send_msg(fd, PEER_ERROR, le64toh(h.a), UINT64_MAX, "bad",
			     3))
			break;
	}
out:
	close(fd);
	return NULL;
}

static void *liar_main(void *arg)
{
	struct liar *l = arg;
	int fd;

	while ((fd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		void **a = malloc(2 * sizeof(*a));
		pthread_t t;

		a[0] = l;
		a[1] = (void *)(intptr_t)fd;
		if (pthread_create(&t, NULL, liar_conn, a) == 0)
			pthread_detach(t);
	}
	return NULL;
}

static int liar_start(struct liar *l)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);

	l->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l->lfd < 0 || bind(l->lfd, (struct sockaddr *)&sa, sl) ||
	    listen(l->lfd, 16) ||
	    getsockname(l->lfd, (struct sockaddr *)&sa, &sl))
		return -1;
	l->port = ntohs(sa.sin_port);
	return pthread_create(&l->th, NULL, liar_main, l) ? -1 : 0;
}

static void liar_stop(struct liar *l)
{
	shutdown(l->lfd, SHUT_RDWR);
	pthread_join(l->th, NULL);
	close(l->lfd);
}

static double now_s(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

/* A sender claiming size bytes in blocks of bsize is refused at open. */
static void claims(uint64_t size, uint32_t bsize, const char *what)
{
	struct liar l = { .size = size, .bsize = bsize };
	struct fl_source *s = NULL;
	char spec[64];
	double t;
	int ret;

	if (liar_start(&l)) {
		ok(0, "%s: cannot start the fake sender", what);
		return;
	}
	snprintf(spec, sizeof(spec), "tcp://127.0.0.1:%u?retry_ms=2000",
		 l.port);
	t = now_s();
	ret = fl_source_open(spec, &s);
	t = now_s() - t;
	ok(ret == -EFBIG && strstr(fl_last_error(), "more than a receiver") &&
	   t < 1.5, "a sender claiming %s: refused in %.2f s (%d: \"%s\")",
	   what, t, ret, fl_last_error());
	if (!ret)
		fl_source_put(s);
	liar_stop(&l);
}

/* An ERROR whose count wraps fails the read it answers, nothing else. */
static void wrapping_error(void)
{
	struct liar l = { .size = 1 << 20, .bsize = 65536,
			  .wrap_error = true };
	struct fl_source *s = NULL;
	char spec[64], buf[4096];
	int ret;

	if (liar_start(&l)) {
		ok(0, "wrapping ERROR: cannot start the fake sender");
		return;
	}
	snprintf(spec, sizeof(spec), "tcp://127.0.0.1:%u?retry_ms=2000",
		 l.port);
	ret = fl_source_open(spec, &s);
	if (ret) {
		ok(0, "wrapping ERROR: open: %s", fl_last_error());
		liar_stop(&l);
		return;
	}
	ret = s->ops->read(s, buf, sizeof(buf), 5 * 65536);
	ok(ret == -EIO && strstr(fl_last_error(), "bad"),
	   "an ERROR for blocks [5, 5 + 2^64-1): the read fails (%d: \"%s\")",
	   ret, fl_last_error());
	fl_source_put(s);
	liar_stop(&l);
}

int main(void)
{
	alarm(60);
	claims(1ull << 46, 4096, "64 TiB");
	claims(1ull << 42, 4096, "4 TiB in 4 KiB blocks (2^30 blocks)");
	wrapping_error();
	return done_testing();
}
