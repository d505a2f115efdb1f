/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sock.h - every socket faultline opens, accepts, connects or passes
 * descriptors over: Unix and TCP listeners, dialling, the peer's
 * credentials, and messages with SCM_RIGHTS both ways.
 *
 * Decision: one module, as Redis keeps anet.c, so that the send loop, the
 * control buffer's size and the truncation checks are written once.
 * -errno returns; a function that names what failed says so in its
 * comment (fl_last_error()).
 */
#ifndef FAULTLINE_UTIL_SOCK_H
#define FAULTLINE_UTIL_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A Unix socket's path, its NUL included, at most (sun_path). */
#define SOCK_UNIX_PATH_MAX	108
/* Descriptors in one message at most: the kernel's SCM_MAX_FD. */
#define SOCK_FDS_MAX	253

/*
 * Listen on a Unix stream socket at path (created 0600, non-blocking,
 * close-on-exec); the path must not exist.  The fd, or -errno with the
 * error set naming path.
 */
int sock_listen_unix(const char *path, int backlog);
/*
 * Make path free for a Unix listener: a socket file nobody listens on is
 * stale and removed.  0; -EADDRINUSE (a server listens), -EEXIST (not a
 * socket), or -errno, with the error set naming path.
 */
int sock_claim_unix(const char *path);
/*
 * Split "HOST:PORT" ("[V6]:PORT"; ":PORT" leaves host empty) into host
 * and port, the port a number from 1 to 65535.  0, or -EINVAL with the
 * error set naming spec and what is wrong.
 */
int sock_split_hostport(const char *spec, char *host, size_t hostlen,
			char *port, size_t portlen);
/*
 * Listen on TCP "HOST:PORT" ("[V6]:PORT", ":PORT" for every address),
 * SO_REUSEADDR.  The fd, or -errno with the error set naming spec.
 */
int sock_listen_tcp(const char *spec, int backlog);
/*
 * systemd's socket activation names this process (LISTEN_PID) and passes
 * at least one listener (LISTEN_FDS): it is fd 3, SD_LISTEN_FDS_START.
 */
#define SOCK_ACTIVATED_FD	3
bool sock_activated(void);
/* Connect a Unix stream socket to path (blocking, close-on-exec). */
int sock_connect_unix(const char *path);
/*
 * Connect to host:port over TCP, each address tried for at most
 * timeout_ms.  The fd (blocking), or -errno with why (if why) saying it.
 */
int sock_connect_tcp(const char *host, const char *port, int timeout_ms,
		     char *why, size_t whylen);
/*
 * accept4() with flags (SOCK_CLOEXEC, SOCK_NONBLOCK); the peer's address
 * as "HOST:PORT" into name (if name; "?" for a Unix peer).  fd or -errno.
 */
int sock_accept(int lfd, int flags, char *name, size_t namelen);

/* Who is on the other end of a Unix socket (SO_PEERCRED at connect). */
struct sock_cred {
	pid_t pid;
	uid_t uid;
	gid_t gid;
};
/* The peer's credentials: 0 or -errno. */
int sock_peer_cred(int fd, struct sock_cred *c);
/*
 * A pidfd of the peer, never of a pid reused since: the socket's own
 * (SO_PEERPIDFD, Linux 6.5: taken at connect), or with fallback, one
 * opened now from SO_PEERCRED's pid (the peer is waiting on us, so that
 * pid is its).  -errno if neither.
 */
int sock_peer_pidfd(int fd, bool fallback);

/*
 * Send all len bytes, the nfds descriptors with the first of them
 * (SCM_RIGHTS), MSG_NOSIGNAL, the rest as the socket takes it.  len > 0.
 * 0 or -errno (-EINVAL: nfds out of range).
 */
int sock_send_fds(int fd, const void *buf, size_t len, const int *fds,
		  int nfds);

/*
 * TCP options for a link that must not hang: no Nagle, and a dead peer
 * noticed within seconds (keepalive and TCP_USER_TIMEOUT), also when
 * nothing is sent.
 */
void sock_tune_tcp(int fd);
/* SO_RCVTIMEO or SO_SNDTIMEO of ms milliseconds (0: none). */
void sock_set_timeout(int fd, int opt, unsigned int ms);

/* Send all len bytes (MSG_NOSIGNAL): 0 or -errno. */
int send_full(int fd, const void *buf, size_t len);
/*
 * Receive exactly len bytes: 0, -ETIMEDOUT (SO_RCVTIMEO expired),
 * -ECONNRESET (the peer closed), or -errno.
 */
int recv_full(int fd, void *buf, size_t len);

/* Send the n buffers of iov, all of them (MSG_NOSIGNAL); iov is used up. */
struct iovec;
int sock_send_iov(int fd, struct iovec *iov, int n);

/* What one sock_recv_fds() got besides its bytes. */
struct sock_fds {
	int fd[SOCK_FDS_MAX];	/* kept, in order (close-on-exec) */
	int n;			/* in fd[] */
	int dropped;		/* more than max: closed at once */
	bool ctrunc;		/* the kernel had more for us (MSG_CTRUNC) */
	bool trunc;		/* the datagram was longer than len */
};
/*
 * recvmsg() once with flags (MSG_DONTWAIT, MSG_PEEK, ...; MSG_CMSG_CLOEXEC
 * always): up to max descriptors into f, the rest closed and counted.  The
 * control buffer also takes what a socket adds uninvited (SCM_CREDENTIALS
 * with SO_PASSCRED, a security label), so that a descriptor does not look
 * cut off by them.  Bytes read, 0 at EOF, or -errno (f empty).
 */
ssize_t sock_recv_fds(int fd, void *buf, size_t len, int flags,
		      struct sock_fds *f, int max);
/* Close every descriptor f holds. */
void sock_fds_close(struct sock_fds *f);

#endif
