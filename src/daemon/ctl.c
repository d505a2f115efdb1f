// SPDX-License-Identifier: Apache-2.0
/*
 * ctl.c - the server's two windows for operators, on the control loop:
 * the control socket (PATH.ctl beside the listening socket, mode 0600,
 * root or the daemon's uid only by SO_PEERCRED) answering "status" with
 * status.c's JSON, and an HTTP/1.1 listener answering GET /metrics with
 * metrics.c's exposition.  One request a connection, then closed.
 *
 * Decisions: on the control loop, not a thread of its own: the session
 * list is the loop's alone (no lock), and a status read there is a
 * consistent picture.  So nothing here may block it: every socket is
 * non-blocking, an answer larger than the socket buffer is sent as the
 * client takes it (POLLOUT), a connection has CTL_DEADLINE_MS for the
 * whole exchange, and at most CTL_CONNS_MAX are open (more wait in the
 * backlog).  Each server opens both anew (a server taking over claims
 * the stale control socket of the one that died), and a clean exit
 * removes the control socket's file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/ctl.h"
#include "daemon/http_req.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/status.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/sock.h"

#define CTL_DEADLINE_MS	5000	/* a connection's whole exchange */
#define CTL_REQ_MAX	64	/* a control request line */

enum { W_CTL = -1, W_HTTP = -2 };	/* ctl.who[]: a listener */

struct conn {
	int fd;			/* -1: a free slot */
	bool http;
	size_t nin;
	char in[HTTP_HEAD_MAX];
	bool answered;		/* out is the answer (NULL: none to send) */
	char *out;
	size_t len, off;
	uint64_t deadline;	/* ms */
};

struct ctl {
	int ctl_fd, http_fd;	/* listeners, or -1 */
	char path[SOCK_UNIX_PATH_MAX];	/* the control socket we bound */
	char http_name[128];	/* the metrics address, for the log */
	struct conn conns[CTL_CONNS_MAX];
	int nconns;
	int who[CTL_POLLFDS_MAX];	/* pollfd i: a listener or conns[i] */
	bool refused_said;	/* a refused uid was logged */
};

int ctl_path_for(const char *sock_path, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s.ctl", sock_path);

	return n < 0 || (size_t)n >= len || (size_t)n >= SOCK_UNIX_PATH_MAX ?
	       -ENAMETOOLONG : 0;
}

int metrics_bind_spec(const char *arg, char *buf, size_t len)
{
	const char *colon = strrchr(arg, ':');
	const char *port = colon ? colon + 1 : arg;
	int n;

	if (!*port || strspn(port, "0123456789") != strlen(port))
		return -EINVAL;
	if (!colon || colon == arg)	/* a port alone: loopback */
		n = snprintf(buf, len, "127.0.0.1:%s", port);
	else
		n = snprintf(buf, len, "%s", arg);
	return n < 0 || (size_t)n >= len ? -EINVAL : 0;
}

/* ---- opening and closing ------------------------------------------------ */

static int open_control(struct ctl *c, const char *path)
{
	int ret = sock_claim_unix(path);

	if (ret < 0)
		return ret;
	ret = sock_listen_unix(path, 16);	/* created 0600 */
	if (ret < 0)
		return ret;
	c->ctl_fd = ret;
	snprintf(c->path, sizeof(c->path), "%s", path);
	return 0;
}

static int open_metrics(struct ctl *c, const char *arg)
{
	char spec[128];
	int fd;

	if (metrics_bind_spec(arg, spec, sizeof(spec)) < 0)
		return fl_err(-EINVAL, "--metrics %s: expected [ADDR:]PORT", arg);
	fd = sock_listen_tcp(spec, 16);
	if (fd < 0 && !strcmp(spec, arg))	/* says "ADDR:PORT: why" */
		return fl_err(fd, "--metrics %s", fl_last_error());
	if (fd < 0)	/* the port alone: the address it means, then why */
		return fl_err(fd, "--metrics %s: %s", arg, fl_last_error());
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
		close(fd);
		return fl_err(-errno, "--metrics %s: %m", arg);
	}
	c->http_fd = fd;
	snprintf(c->http_name, sizeof(c->http_name), "%s", spec);
	return 0;
}

int ctl_open(struct daemon *d)
{
	const struct serve_config *cfg = d->cfg;
	struct ctl *c;
	int ret = 0;

	if (!cfg->control_path && !cfg->metrics_addr)
		return 0;
	c = calloc(1, sizeof(*c));
	if (!c)
		return fl_err(-ENOMEM, "out of memory");
	c->ctl_fd = c->http_fd = -1;
	for (int i = 0; i < CTL_CONNS_MAX; i++)
		c->conns[i].fd = -1;
	d->ctl = c;
	if (cfg->control_path)
		ret = open_control(c, cfg->control_path);
	if (ret == 0 && cfg->metrics_addr)
		ret = open_metrics(c, cfg->metrics_addr);
	if (ret < 0) {
		ctl_close(d);
		return ret;
	}
	if (c->ctl_fd >= 0)
		slog(NULL, "status: faultline status --control %s", c->path);
	if (c->http_fd >= 0)
		slog(NULL, "metrics: http://%s/metrics", c->http_name);
	return 0;
}

static void conn_close(struct ctl *c, struct conn *k)
{
	char sink[512];

	/* What the client sent beyond its request: read, so no RST cuts
	 * off the answer it is reading. */
	while (recv(k->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
	close(k->fd);
	free(k->out);
	*k = (struct conn){ .fd = -1 };
	c->nconns--;
}

void ctl_close(struct daemon *d)
{
	struct ctl *c = d->ctl;

	if (!c)
		return;
	for (int i = 0; i < CTL_CONNS_MAX; i++)
		if (c->conns[i].fd >= 0)
			conn_close(c, &c->conns[i]);
	if (c->ctl_fd >= 0) {
		close(c->ctl_fd);
		unlink(c->path);
	}
	if (c->http_fd >= 0)
		close(c->http_fd);
	free(c);
	d->ctl = NULL;
}

/* ---- answers ------------------------------------------------------------ */

/* The answer to send: body (taken), after an HTTP head if http. */
static void answer(struct conn *k, int code, const char *reason,
		   const char *type, char *body, size_t blen, bool head_only,
		   const char *extra)
{
	char *out = NULL;
	int n;

	k->answered = true;
	if (!k->http) {
		k->out = body;
		k->len = body ? blen : 0;
		return;
	}
	n = asprintf(&out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
		     "Content-Length: %zu\r\n%sConnection: close\r\n\r\n%.*s",
		     code, reason, type, blen, extra ? extra : "",
		     head_only ? 0 : (int)blen, body ? body : "");
	free(body);
	k->out = n < 0 ? NULL : out;
	k->len = n < 0 ? 0 : (size_t)n;
}

static void http_text(struct conn *k, int code, const char *reason,
		      const char *extra)
{
	char *body = NULL;
	int n = asprintf(&body, "%d %s\n", code, reason);

	answer(k, code, reason, "text/plain; charset=utf-8", body,
	       n < 0 ? 0 : (size_t)n, false, extra);
}

static const char *http_reason(int code)
{
	switch (code) {
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 505: return "HTTP Version Not Supported";
	default: return "Bad Request";
	}
}

/* A whole request head is in (or it is bad): what to answer. */
static void http_request(struct daemon *d, struct conn *k)
{
	struct http_req r;
	int ret = http_req_parse(k->in, k->nin, &r);
	bool head;

	if (ret == 0)
		return;		/* more to come */
	if (ret < 0) {
		int code = http_req_error_status(ret);

		http_text(k, code, http_reason(code), NULL);
		return;
	}
	head = !strcmp(r.method, "HEAD");
	if (!head && strcmp(r.method, "GET")) {
		http_text(k, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n");
		return;
	}
	if (strcmp(r.path, "/metrics")) {
		http_text(k, 404, "Not Found", NULL);
		return;
	}
	size_t len = 0;
	char *body = metrics_text(d, &len);

	if (!body) {
		http_text(k, 503, "Service Unavailable", NULL);
		return;
	}
	answer(k, 200, "OK", METRICS_CONTENT_TYPE, body, len, head, NULL);
}

static char *json_error(const char *msg)
{
	char *out = NULL;

	return asprintf(&out, "{\"error\":\"%s\"}\n", msg) < 0 ? NULL : out;
}

/* A control request line is in (or too long): what to answer. */
static void ctl_request(struct daemon *d, struct conn *k)
{
	char *nl = memchr(k->in, '\n', k->nin), *body;

	if (!nl && k->nin < CTL_REQ_MAX)
		return;
	if (nl && nl > k->in && nl[-1] == '\r')
		nl--;
	if (nl && (size_t)(nl - k->in) == strlen(CTL_REQ_STATUS) &&
	    !memcmp(k->in, CTL_REQ_STATUS, strlen(CTL_REQ_STATUS))) {
		char *js = status_json(d);

		body = js ? NULL : json_error("out of memory");
		if (js && asprintf(&body, "%s\n", js) < 0)
			body = NULL;
		free(js);
	} else {
		body = json_error("unknown request (\\\"status\\\" is known)");
	}
	answer(k, 0, NULL, NULL, body, body ? strlen(body) : 0, false, NULL);
}

/* ---- connections -------------------------------------------------------- */

/* Root or the daemon's own uid; anyone else is told so and closed. */
static bool ctl_peer_allowed(struct ctl *c, struct conn *k)
{
	struct sock_cred cred;
	char msg[128];

	if (sock_peer_cred(k->fd, &cred) == 0 &&
	    (cred.uid == 0 || cred.uid == getuid()))
		return true;
	if (!c->refused_said)
		slog(NULL, "control socket: uid %u refused (root or uid %u "
		     "only)", (unsigned int)cred.uid, (unsigned int)getuid());
	c->refused_said = true;
	snprintf(msg, sizeof(msg), "permission denied: root or uid %u only",
		 (unsigned int)getuid());
	char *body = json_error(msg);

	answer(k, 0, NULL, NULL, body, body ? strlen(body) : 0, false, NULL);
	return false;
}

static void accept_conn(struct ctl *c, int lfd, bool http)
{
	struct conn *k = NULL;
	int fd = sock_accept(lfd, SOCK_CLOEXEC | SOCK_NONBLOCK, NULL, 0);

	if (fd < 0)
		return;
	for (int i = 0; i < CTL_CONNS_MAX && !k; i++)
		if (c->conns[i].fd < 0)
			k = &c->conns[i];
	if (!k) {		/* not polled when full: never here */
		close(fd);
		return;
	}
	*k = (struct conn){ .fd = fd, .http = http,
			    .deadline = now_ms() + CTL_DEADLINE_MS };
	c->nconns++;
	if (!http)
		ctl_peer_allowed(c, k);
}

/* Read what came; answer once the request is whole.  false: close it. */
static bool conn_read(struct daemon *d, struct conn *k)
{
	ssize_t n = recv(k->fd, k->in + k->nin, sizeof(k->in) - k->nin,
			 MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return false;
	if (n < 0)
		return true;
	k->nin += (size_t)n;
	if (k->http)
		http_request(d, k);
	else
		ctl_request(d, k);
	return true;
}

/* Send what the socket takes.  false: done (or failed): close it. */
static bool conn_write(struct conn *k)
{
	while (k->off < k->len) {
		ssize_t n = send(k->fd, k->out + k->off, k->len - k->off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		k->off += (size_t)n;
	}
	shutdown(k->fd, SHUT_WR);
	return false;
}

int ctl_pollfds(struct daemon *d, struct pollfd *pfd)
{
	struct ctl *c = d->ctl;
	int n = 0;

	if (!c)
		return 0;
	if (c->nconns < CTL_CONNS_MAX) {
		if (c->ctl_fd >= 0) {
			c->who[n] = W_CTL;
			pfd[n++] = (struct pollfd){ .fd = c->ctl_fd, .events = POLLIN };
		}
		if (c->http_fd >= 0) {
			c->who[n] = W_HTTP;
			pfd[n++] = (struct pollfd){ .fd = c->http_fd, .events = POLLIN };
		}
	}
	for (int i = 0; i < CTL_CONNS_MAX; i++) {
		struct conn *k = &c->conns[i];

		if (k->fd < 0)
			continue;
		c->who[n] = i;
		pfd[n++] = (struct pollfd){ .fd = k->fd,
					    .events = k->answered ?
						      POLLOUT : POLLIN };
	}
	return n;
}

void ctl_service(struct daemon *d, const struct pollfd *pfd, int n)
{
	struct ctl *c = d->ctl;
	uint64_t now = now_ms();

	if (!c)
		return;
	for (int i = 0; i < n; i++) {
		if (!pfd[i].revents)
			continue;
		if (c->who[i] == W_CTL || c->who[i] == W_HTTP) {
			accept_conn(c, pfd[i].fd, c->who[i] == W_HTTP);
			continue;
		}
		struct conn *k = &c->conns[c->who[i]];
		bool keep = k->answered ? conn_write(k) : conn_read(d, k);

		if (keep && k->answered && !k->off)
			keep = conn_write(k);	/* answered: send at once */
		if (!keep)
			conn_close(c, k);
	}
	for (int i = 0; i < CTL_CONNS_MAX; i++)
		if (c->conns[i].fd >= 0 && now >= c->conns[i].deadline)
			conn_close(c, &c->conns[i]);
}
