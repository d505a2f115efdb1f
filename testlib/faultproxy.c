// SPDX-License-Identifier: Apache-2.0
/*
 * faultproxy.c - the storage-fault tests' fault-injecting HTTP proxy
 * (faultproxy.h): a forked process relaying one request per connection to
 * a real origin, or failing it as programmed in shared memory.
 *
 * Decision: parse only what choosing and placing a fault needs (the
 * request line, Range, Content-Length, the end of the headers); relay
 * every other byte untouched, so that a signed S3 request still verifies
 * at the origin.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "faultproxy.h"

#define FP_KEYS		4096
#define FP_KEY_LEN	200
#define FP_HDR		16384

struct fp_key {
	char key[FP_KEY_LEN];
	int seen;
};

struct fp_shared {
	pthread_mutex_t mu;	/* process-shared: the test sets, we read */
	int fault, times, total, arg;
	long injected, requests;
	long pending;		/* chosen, not yet injected or given up */
	unsigned int gen;	/* fp_set()s so far */
	int nkeys;
	struct fp_key keys[FP_KEYS];
};

/* The lock, robust: a proxy killed while it held it does not block us. */
static void fp_lock(struct fp_shared *sh)
{
	if (pthread_mutex_lock(&sh->mu) == EOWNERDEAD)
		pthread_mutex_consistent(&sh->mu);
}

static const char slowdown_body[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown"
	"</Code><Message>Please reduce your request rate.</Message>"
	"<RequestId>faultproxy</RequestId></Error>";

/* ---- the proxy process ----------------------------------------------------- */

struct fp_conn {
	struct fp_shared *sh;
	int origin_port;
	int fd;
	unsigned int gen;	/* the program its fault was chosen by */
	bool done;		/* that fault was injected */
};

static bool send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* Close with a reset (RST), not a FIN. */
static void close_rst(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

/*
 * Read fd until the end of the headers ("\r\n\r\n"): the bytes read (some
 * body may follow the headers) and *hend, the headers' length; -1 if the
 * peer closed or the headers do not fit.
 */
static ssize_t read_headers(int fd, char *buf, size_t cap, size_t *hend)
{
	size_t n = 0;

	while (n < cap - 1) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		char *e;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		n += (size_t)r;
		buf[n] = 0;
		e = strstr(buf, "\r\n\r\n");
		if (e) {
			*hend = (size_t)(e - buf) + 4;
			return (ssize_t)n;
		}
	}
	return -1;
}

/* A header's value in headers (NUL-terminated), copied to out; or false. */
static bool header(const char *hdrs, const char *name, char *out, size_t n)
{
	size_t nl = strlen(name);
	const char *l = strstr(hdrs, "\r\n");

	while (l && l[2] && !(l[2] == '\r' && l[3] == '\n')) {
		l += 2;
		if (!strncasecmp(l, name, nl) && l[nl] == ':') {
			const char *v = l + nl + 1;

			v += strspn(v, " \t");
			snprintf(out, n, "%.*s", (int)strcspn(v, "\r\n"), v);
			return true;
		}
		l = strstr(l, "\r\n");
	}
	return false;
}

/* Which fault this request gets (counted per distinct request). */
static enum fp_fault decide(struct fp_conn *c, const char *key, int *arg)
{
	struct fp_shared *sh = c->sh;
	enum fp_fault f;

	fp_lock(sh);
	c->gen = sh->gen;
	sh->requests++;
	f = (enum fp_fault)sh->fault;
	*arg = sh->arg;
	if (f != FP_PASS && sh->total != FP_FOREVER &&
	    sh->injected + sh->pending >= sh->total)
		f = FP_PASS;
	if (f != FP_PASS && sh->times != FP_FOREVER) {
		int i;

		for (i = 0; i < sh->nkeys; i++)
			if (!strcmp(sh->keys[i].key, key))
				break;
		if (i == sh->nkeys && i < FP_KEYS) {
			snprintf(sh->keys[i].key, FP_KEY_LEN, "%s", key);
			sh->keys[i].seen = 0;
			sh->nkeys++;
		}
		if (i == FP_KEYS || sh->keys[i].seen >= sh->times)
			f = FP_PASS;
		else
			sh->keys[i].seen++;
	}
	if (f != FP_PASS)
		sh->pending++;
	pthread_mutex_unlock(&sh->mu);
	return f;
}

/* The fault chosen for c was injected, or could not be (c->done). */
static void settle(struct fp_conn *c)
{
	struct fp_shared *sh = c->sh;

	fp_lock(sh);
	sh->pending--;
	if (c->done && c->gen == sh->gen)
		sh->injected++;
	pthread_mutex_unlock(&sh->mu);
}

static void answer_status(struct fp_conn *c, int status, bool s3)
{
	const char *body = s3 ? slowdown_body : "faultproxy: injected error\n";
	char hdr[256];

	snprintf(hdr, sizeof(hdr), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n", status,
		 s3 ? "Slow Down" : status == 503 ? "Service Unavailable" :
		 "Internal Server Error", s3 ? "application/xml" :
		 "text/plain", strlen(body));
	if (send_all(c->fd, hdr, strlen(hdr)) &&
	    send_all(c->fd, body, strlen(body)))
		c->done = true;
}

static int origin_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * The request to the origin: its request line, "Connection: close", its
 * other headers but Connection and Keep-Alive, then its body (the part
 * already read, then the rest by Content-Length).  false if it failed.
 */
static bool forward_request(struct fp_conn *c, int o, char *req, size_t n,
			    size_t hend)
{
	char *line = strstr(req, "\r\n") + 2, *end = req + hend, v[32];
	long long left = 0;

	if (header(req, "Content-Length", v, sizeof(v)))
		left = atoll(v) - (long long)(n - hend);
	if (!send_all(o, req, (size_t)(line - req)) ||
	    !send_all(o, "Connection: close\r\n", 19))
		return false;
	while (line < end) {
		char *next = strstr(line, "\r\n") + 2;

		if (strncasecmp(line, "Connection:", 11) &&
		    strncasecmp(line, "Keep-Alive:", 11) &&
		    !send_all(o, line, (size_t)(next - line)))
			return false;
		line = next;
	}
	if (n > hend && !send_all(o, req + hend, n - hend))
		return false;
	while (left > 0) {
		char buf[65536];
		ssize_t r = read(c->fd, buf, left < (long long)sizeof(buf) ?
				 (size_t)left : sizeof(buf));

		if (r <= 0 || !send_all(o, buf, (size_t)r))
			return false;
		left -= r;
	}
	return true;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * Relay the origin's response to the client, failing it as f says.  The
 * client's socket is closed here (with a RST for the resets).
 */
static void relay_response(struct fp_conn *c, int o, enum fp_fault f,
			   int arg)
{
	static __thread char buf[FP_HDR];
	long long clen = -1, sent = 0, half = -1;
	size_t hend, have;
	ssize_t n = read_headers(o, buf, sizeof(buf), &hend);
	char v[32];

	if (n < 0) {
		close(c->fd);	/* the origin closed: so do we */
		return;
	}
	if (header(buf, "Content-Length", v, sizeof(v)))
		clen = atoll(v);
	if (f == FP_RESET_HEADERS) {
		if (send_all(c->fd, buf, hend / 2))
			c->done = true;
		close_rst(c->fd);
		return;
	}
	if ((f == FP_RESET_BODY || f == FP_SHORT_BODY || f == FP_STALL) &&
	    clen > 1)
		half = clen / 2;
	if (!send_all(c->fd, buf, hend))
		goto out;
	have = (size_t)n - hend;
	memmove(buf, buf + hend, have);
	for (;;) {
		if (!have) {
			n = read(o, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			have = (size_t)n;
		}
		if (half >= 0 && sent + (long long)have > half) {
			size_t first = (size_t)(half - sent);

			if (!send_all(c->fd, buf, first))
				goto out;
			sent += (long long)first;
			have -= first;
			memmove(buf, buf + first, have);
			half = -1;
			c->done = true;
			if (f == FP_RESET_BODY) {
				close_rst(c->fd);
				return;
			}
			if (f == FP_SHORT_BODY)
				goto out;
			sleep_ms(arg);
			continue;
		}
		if (!send_all(c->fd, buf, have))
			goto out;
		sent += (long long)have;
		have = 0;
	}
out:
	close(c->fd);
}

static void *conn_main(void *arg)
{
	struct fp_conn *c = arg;
	static __thread char req[FP_HDR];
	char method[16] = "", path[FP_KEY_LEN / 2] = "", range[64] = "";
	char key[FP_KEY_LEN];
	enum fp_fault f = FP_PASS;
	size_t hend;
	ssize_t n = read_headers(c->fd, req, sizeof(req), &hend);
	int o, farg;

	if (n < 0) {
		close(c->fd);
		goto done;
	}
	if (sscanf(req, "%15s %99s", method, path) != 2 ||
	    !strstr(req, "\r\n")) {
		close(c->fd);
		goto done;
	}
	header(req, "Range", range, sizeof(range));
	snprintf(key, sizeof(key), "%s %s %s", method, path, range);
	f = decide(c, key, &farg);
	if (f == FP_STATUS || f == FP_SLOWDOWN) {
		answer_status(c, f == FP_SLOWDOWN ? 503 : farg,
			      f == FP_SLOWDOWN);
		close(c->fd);
		goto done;
	}
	if (f == FP_SILENT) {
		char sink[4096];

		c->done = true;
		settle(c);	/* now: the connection may stay for ever */
		f = FP_PASS;
		for (;;) {
			ssize_t r = read(c->fd, sink, sizeof(sink));

			if (r == 0 || (r < 0 && errno != EINTR))
				break;
		}
		close(c->fd);
		goto done;
	}
	o = origin_connect(c->origin_port);
	if (o < 0) {
		close_rst(c->fd);
		goto done;
	}
	if (forward_request(c, o, req, (size_t)n, hend))
		relay_response(c, o, f, farg);
	else
		close(c->fd);
	close(o);
done:
	if (f != FP_PASS)
		settle(c);
	free(c);
	return NULL;
}

static __attribute__((noreturn)) void proxy_main(struct fp_shared *sh,
						 int lfd, int origin_port)
{
	pthread_attr_t at;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGPIPE, SIG_IGN);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 256 << 10);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		struct fp_conn *c;
		pthread_t t;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				sleep_ms(10);
			continue;
		}
		c = malloc(sizeof(*c));
		if (!c) {
			close_rst(fd);
			continue;
		}
		*c = (struct fp_conn){ .sh = sh, .origin_port = origin_port,
				       .fd = fd };
		if (pthread_create(&t, &at, conn_main, c)) {
			close_rst(fd);
			free(c);
		}
	}
}

/* ---- the test's side ------------------------------------------------------- */

/* Listen on 127.0.0.1:p->port (0: any) and fork the proxy: 0 or -1. */
static int fp_listen(struct faultproxy *p)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)p->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int lfd, one = 1;

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(lfd, 256) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen) < 0) {
		close(lfd);
		return -1;
	}
	p->port = ntohs(a.sin_port);
	fflush(NULL);
	p->pid = fork();
	if (p->pid == 0)
		proxy_main(p->sh, lfd, p->origin_port);
	close(lfd);
	return p->pid < 0 ? -1 : 0;
}

int fp_start(struct faultproxy *p, int origin_port)
{
	pthread_mutexattr_t ma;

	memset(p, 0, sizeof(*p));
	p->pid = -1;
	p->origin_port = origin_port;
	p->sh = mmap(NULL, sizeof(*p->sh), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p->sh == MAP_FAILED) {
		p->sh = NULL;
		return -1;
	}
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&p->sh->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	return fp_listen(p);
}

int fp_revive(struct faultproxy *p)
{
	if (p->pid > 0)
		return 0;
	fp_lock(p->sh);
	p->sh->pending = 0;	/* the dead proxy's connections are gone */
	pthread_mutex_unlock(&p->sh->mu);
	return fp_listen(p);
}

void fp_set(struct faultproxy *p, enum fp_fault fault, int times, int total,
	    int arg)
{
	fp_lock(p->sh);
	p->sh->gen++;
	p->sh->fault = fault;
	p->sh->times = times;
	p->sh->total = total;
	p->sh->arg = arg;
	p->sh->nkeys = 0;
	p->sh->injected = 0;
	p->sh->requests = 0;	/* pending stays: those still in flight */
	pthread_mutex_unlock(&p->sh->mu);
}

static long counter(const struct faultproxy *p, const long *v)
{
	long n;

	fp_lock(p->sh);
	n = *v;
	pthread_mutex_unlock(&p->sh->mu);
	return n;
}

long fp_injected(const struct faultproxy *p)
{
	return counter(p, &p->sh->injected);
}

long fp_requests(const struct faultproxy *p)
{
	return counter(p, &p->sh->requests);
}

void fp_kill(struct faultproxy *p)
{
	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
	}
	p->pid = -1;
}

void fp_stop(struct faultproxy *p)
{
	fp_kill(p);
	if (p->sh)
		munmap(p->sh, sizeof(*p->sh));
	p->sh = NULL;
}
