// SPDX-License-Identifier: Apache-2.0
/*
 * sock.c - listening, dialling, accepting with the peer's credentials, and
 * descriptors passed both ways (SCM_RIGHTS), for every layer above.
 *
 * Decision: Redis's anet.c as the model, one module for all of it: before
 * it, two listen_on()s, the fd-passing send loop twice and three cmsg
 * walks each sized its own way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "kernel/proc.h"
#include "util/error.h"
#include "util/sock.h"

_Static_assert(SOCK_UNIX_PATH_MAX == sizeof(((struct sockaddr_un *)0)->sun_path),
	       "sun_path");

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD	77	/* Linux 6.5 */
#endif

int sock_listen_unix(const char *path, int backlog)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, ret;

	if (strlen(path) >= sizeof(a.sun_path))
		return fl_err(-ENAMETOOLONG, "%s: path too long", path);
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return fl_err(-errno, "%s: socket: %m", path);
	mode_t old = umask(0177);	/* the socket is created 0600 */

	ret = bind(fd, (struct sockaddr *)&a, sizeof(a));
	umask(old);
	if (ret < 0 || listen(fd, backlog) < 0) {
		ret = -errno;
		close(fd);
		return fl_err(ret, "%s: cannot listen: %s", path, strerror(-ret));
	}
	return fd;
}

int sock_claim_unix(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 :
		       fl_err(-errno, "%s: %s", path, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return fl_err(-EEXIST, "%s exists and is not a socket", path);
	/*
	 * A server bound by this very absolute path is seen without
	 * connecting to it (which it would log as a client).  A relative
	 * name says nothing (another directory's server may have bound the
	 * same string), nor does another name for the file: those are
	 * only told by a connection.
	 */
	bool seen = path[0] == '/' && proc_unix_listening(path) == 1;
	int fd = seen ? -1 : sock_connect_unix(path);

	if (seen || fd >= 0) {
		if (fd >= 0)
			close(fd);
		return fl_err(-EADDRINUSE, "%s: another server is listening on it",
			      path);
	}
	if (unlink(path) < 0)
		return fl_err(-errno, "%s: %s", path, strerror(errno));
	return 0;
}

/* A port as a number from 1 to 65535 (no service names): it, or 0. */
static unsigned int port_number(const char *s)
{
	unsigned long v = 0;

	for (; *s >= '0' && *s <= '9' && v <= 65535; s++)
		v = v * 10 + (unsigned long)(*s - '0');
	return *s || v > 65535 ? 0 : (unsigned int)v;
}

int sock_split_hostport(const char *spec, char *host, size_t hostlen,
			char *port, size_t portlen)
{
	const char *colon = strrchr(spec, ':'), *h = spec;
	size_t hl;

	if (!colon || !colon[1])
		return fl_err(-EINVAL, "%s: expected HOST:PORT", spec);
	hl = (size_t)(colon - spec);
	if (hl >= 2 && h[0] == '[' && colon[-1] == ']') {
		h++;
		hl -= 2;
	}
	if (!port_number(colon + 1))
		return fl_err(-EINVAL, "%s: port '%s': not a number from 1 to "
			      "65535", spec, colon + 1);
	if (hl >= hostlen || strlen(colon + 1) >= portlen)
		return fl_err(-EINVAL, "%s: too long", spec);
	memcpy(host, h, hl);
	host[hl] = 0;
	snprintf(port, portlen, "%u", port_number(colon + 1));
	return 0;
}

int sock_listen_tcp(const char *spec, int backlog)
{
	char host[256], port[8];
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE |
					      AI_NUMERICSERV }, *res;
	int fd, one = 1, ret;

	ret = sock_split_hostport(spec, host, sizeof(host), port,
				  sizeof(port));
	if (ret < 0)
		return ret;
	ret = getaddrinfo(*host ? host : NULL, port, &hints, &res);
	if (ret)
		return fl_err(-EINVAL, "%s: %s", spec, gai_strerror(ret));
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC,
		    res->ai_protocol);
	if (fd < 0) {
		ret = fl_err(-errno, "%s: socket: %m", spec);
		goto out;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 ||
	    listen(fd, backlog) < 0) {
		ret = fl_err(-errno, "%s: %m", spec);
		close(fd);
		goto out;
	}
	ret = fd;
out:
	freeaddrinfo(res);
	return ret;
}

bool sock_activated(void)
{
	const char *lfds = getenv("LISTEN_FDS"), *lpid = getenv("LISTEN_PID");

	return lfds && lpid && atoi(lpid) == getpid() && atoi(lfds) >= 1;
}

int sock_connect_unix(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

/* One address, at most timeout_ms; the fd made blocking again. */
static int dial_addr(const struct addrinfo *ai, int timeout_ms)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
			SOCK_NONBLOCK, ai->ai_protocol);
	int err = 0;
	socklen_t elen = sizeof(err);

	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		struct pollfd pfd = { fd, POLLOUT, 0 };

		if (errno != EINPROGRESS) {
			err = errno;
			goto fail;
		}
		int n = poll(&pfd, 1, timeout_ms);

		if (n <= 0) {
			err = n == 0 ? ETIMEDOUT : errno;
			goto fail;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
		if (err)
			goto fail;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
fail:
	close(fd);
	return -err;
}

int sock_connect_tcp(const char *host, const char *port, int timeout_ms,
		     char *why, size_t whylen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int fd = -ENOENT, ret;

	ret = getaddrinfo(host, port, &hints, &res);
	if (ret) {
		int err = ret == EAI_SYSTEM ? errno : ret == EAI_MEMORY ?
			  ENOMEM : ret == EAI_AGAIN ? EAGAIN : EHOSTUNREACH;

		if (why)
			snprintf(why, whylen, "cannot resolve %.60s: %s", host,
				 gai_strerror(ret));
		return err ? -err : -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = dial_addr(ai, timeout_ms);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(res);
	if (fd < 0 && why)
		snprintf(why, whylen, "cannot connect: %s", strerror(-fd));
	return fd;
}

int sock_accept(int lfd, int flags, char *name, size_t namelen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[NI_MAXHOST], port[NI_MAXSERV];
	int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, flags);

	if (fd < 0)
		return -errno;
	if (!name)
		return fd;
	if (ss.ss_family == AF_UNIX ||
	    getnameinfo((const struct sockaddr *)&ss, sl, host, sizeof(host),
			port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(name, namelen, "?");
	else
		snprintf(name, namelen, "%.40s:%.8s", host, port);
	return fd;
}

int sock_peer_cred(int fd, struct sock_cred *c)
{
	struct ucred u;
	socklen_t len = sizeof(u);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &u, &len) < 0)
		return -errno;
	*c = (struct sock_cred){ .pid = u.pid, .uid = u.uid, .gid = u.gid };
	return 0;
}

int sock_peer_pidfd(int fd, bool fallback)
{
	struct sock_cred c;
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0)
		return pidfd;
	if (!fallback)
		return -errno;
	/* Before Linux 6.5: opened now, while the peer waits on us. */
	if (sock_peer_cred(fd, &c) < 0 || c.pid <= 0)
		return -ESRCH;
	return proc_pidfd_open(c.pid);
}

int sock_send_fds(int fd, const void *buf, size_t len, const int *fds,
		  int nfds)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * SOCK_FDS_MAX)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds < 0 || nfds > SOCK_FDS_MAX || !len)
		return -EINVAL;
	if (nfds) {
		memset(ctl.b, 0, CMSG_SPACE(sizeof(int) * nfds));
		mh.msg_control = ctl.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	while (iov.iov_len) {
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		/* The descriptors went with the first byte. */
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		iov.iov_base = (char *)iov.iov_base + n;
		iov.iov_len -= (size_t)n;
	}
	return 0;
}

int send_full(int fd, const void *buf, size_t len)
{
	return len ? sock_send_fds(fd, buf, len, NULL, 0) : 0;
}

int recv_full(int fd, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = recv(fd, (char *)buf + done, len - done, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (n == 0)
			return -ECONNRESET;
		done += (size_t)n;
	}
	return 0;
}

int sock_send_iov(int fd, struct iovec *iov, int n)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };

	while (m.msg_iovlen) {
		ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		while (w && m.msg_iovlen) {
			size_t l = m.msg_iov->iov_len < (size_t)w ?
				   m.msg_iov->iov_len : (size_t)w;

			m.msg_iov->iov_base = (char *)m.msg_iov->iov_base + l;
			m.msg_iov->iov_len -= l;
			w -= (ssize_t)l;
			if (!m.msg_iov->iov_len) {
				m.msg_iov++;
				m.msg_iovlen--;
			}
		}
	}
	return 0;
}

/*
 * Room for max descriptors and for what a socket may add uninvited:
 * SCM_CREDENTIALS (SO_PASSCRED, systemd's PassCredentials=), a security
 * label, a pidfd.
 */
#define CTL_EXTRA	(CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(256) + \
			 CMSG_SPACE(sizeof(int)))

ssize_t sock_recv_fds(int fd, void *buf, size_t len, int flags,
		      struct sock_fds *f, int max)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * SOCK_FDS_MAX) + CTL_EXTRA];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.b };
	ssize_t n;

	if (max < 0 || max > SOCK_FDS_MAX)
		max = SOCK_FDS_MAX;
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * (max ? max : 1)) +
			    CTL_EXTRA;
	f->n = f->dropped = 0;
	f->ctrunc = f->trunc = false;
	do {
		n = recvmsg(fd, &mh, flags | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR && !(flags & MSG_DONTWAIT));
	if (n < 0)
		return -errno;	/* the control buffer holds nothing */
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c;
	     c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

		for (int i = 0; i < k; i++) {
			int v;

			memcpy(&v, CMSG_DATA(c) + i * sizeof(int), sizeof(v));
			if (f->n < max) {
				f->fd[f->n++] = v;
			} else {
				close(v);
				f->dropped++;
			}
		}
	}
	f->ctrunc = mh.msg_flags & MSG_CTRUNC;
	f->trunc = mh.msg_flags & MSG_TRUNC;
	return n;
}

void sock_fds_close(struct sock_fds *f)
{
	while (f->n)
		close(f->fd[--f->n]);
}

#define USER_TIMEOUT_MS	3000

void sock_tune_tcp(int fd)
{
	int one = 1, idle = 1, cnt = 3;
	unsigned int uto = USER_TIMEOUT_MS;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
}

void sock_set_timeout(int fd, int opt, unsigned int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv));
}
