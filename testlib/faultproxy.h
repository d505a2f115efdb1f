/* SPDX-License-Identifier: Apache-2.0 */
/*
 * faultproxy.h - a fault-injecting HTTP proxy for the storage-fault tests:
 * it listens on 127.0.0.1 and relays each request to a real origin (nginx,
 * the S3 test server), or, as the test programs it, answers 500/503 or
 * S3's 503 SlowDown instead, resets the connection in the response's
 * headers or body, sends a short body (Content-Length promised, then a
 * clean close), stalls mid-body, or answers nothing at all.  Killing it
 * (fp_kill) is an origin that died: its port refuses connections.
 *
 * Decisions: a forked process (a thread per connection) with its program
 * and counters in shared memory, so that a dead origin is the kernel
 * closing its sockets, not code imitating it; one request per connection
 * ("Connection: close" is added to what goes to the origin), so a
 * response's end is the origin's close and no HTTP parsing beyond the
 * headers is needed.  A fault applies to the first `times` requests of
 * each distinct request (method, path and Range), so "503 twice per range"
 * is one rule; it counts only faults it really injected.
 */
#ifndef FAULTLINE_TESTLIB_FAULTPROXY_H
#define FAULTLINE_TESTLIB_FAULTPROXY_H

#include <sys/types.h>

enum fp_fault {
	FP_PASS,		/* relay as is */
	FP_STATUS,		/* answer arg (500, 503), no origin asked */
	FP_SLOWDOWN,		/* 503 with S3's SlowDown error body */
	FP_RESET_HEADERS,	/* half the response's headers, then RST */
	FP_RESET_BODY,		/* headers and half the body, then RST */
	FP_SHORT_BODY,		/* headers and half the body, then FIN */
	FP_STALL,		/* half the body, arg ms of nothing, the rest */
	FP_SILENT,		/* read the request, answer nothing, ever */
};

#define FP_FOREVER	(-1)

struct fp_shared;

struct faultproxy {
	pid_t pid;
	int port;
	int origin_port;
	struct fp_shared *sh;
};

/* Start a proxy for 127.0.0.1:origin_port: 0, or -1 with errno. */
int fp_start(struct faultproxy *p, int origin_port);

/*
 * From now on inject fault on the first `times` (FP_FOREVER: all) requests
 * of each distinct request, at most `total` faults in all (FP_FOREVER: no
 * bound); arg is FP_STATUS's status or FP_STALL's ms.  Forgets which
 * requests were seen and zeroes the counters.
 */
void fp_set(struct faultproxy *p, enum fp_fault fault, int times, int total,
	    int arg);

/* Faults injected since the last fp_set(). */
long fp_injected(const struct faultproxy *p);

/* Requests received since the last fp_set(). */
long fp_requests(const struct faultproxy *p);

/* The origin dies: the proxy is killed, its port refuses connections. */
void fp_kill(struct faultproxy *p);

/* The origin is back: a proxy on the same port again, as programmed. */
int fp_revive(struct faultproxy *p);

/* Kill it if alive and free what it holds. */
void fp_stop(struct faultproxy *p);

#endif
