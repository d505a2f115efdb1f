// SPDX-License-Identifier: Apache-2.0
/*
 * takeover.c - the server's side of a takeover: adopting the sessions the
 * supervisor kept from the server before this one (serving ones, and
 * handshakes under way), and handing every session over on an upgrade.
 *
 * Decision: a kept session is restored through its protocol's own
 * restore() from the blob and descriptors its keep() made; nothing here
 * reads a byte of any protocol (docs/architecture.md, Surviving the
 * server's death).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/allow.h"
#include "daemon/daemon.h"
#include "daemon/handshake.h"
#include "daemon/log.h"
#include "daemon/session.h"
#include "daemon/supchan.h"
#include "daemon/takeover.h"
#include "kernel/proc.h"
#include "util/error.h"
#include "util/sock.h"

static void nonblocking(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/*
 * A session without a socket came with its descriptors from SUP_UFFD
 * on: put the missing socket's place back (-1), so the rest reads alike.
 */
static void no_sock(struct sock_fds *f)
{
	memmove(f->fd + 1, f->fd, sizeof(int) * (size_t)f->n);
	f->fd[SUP_SOCK] = -1;
	f->n++;
}

/* Serve one session the last server had, as the supervisor kept it. */
static void adopt_one(struct daemon *d, const struct proto_ops *proto,
		      const struct sup_rec *rec, struct sock_fds *f)
{
	const struct sup_region *rr = sup_regions(rec);
	struct fl_region_desc *regs = calloc(rec->nregions + 1, sizeof(*regs));
	struct session *s = calloc(1, sizeof(*s));
	void *pstate = NULL;
	int ret;

	if (!s || !regs || proto->open(&pstate, fl_source_size(d->src), d->cfg->proto_arg)) {
		sock_fds_close(f);
		free(regs);
		free(s);
		return;
	}
	/* A pid may be reused by now: the socket's own pidfd, or none. */
	*s = (struct session){ .d = d, .id = rec->id, .sock = f->fd[SUP_SOCK],
			       .uffd = f->fd[SUP_UFFD],
			       .pidfd = sock_peer_pidfd(f->fd[SUP_SOCK],
							false),
			       .state_fd = f->fd[SUP_STATE], .pid = rec->pid,
			       .uid = rec->uid, .t_start = rec->t_start,
			       .client_pid = rec->client_pid, .nfds = 1,
			       .conn = rec->conn, .held = rec->conn > 0,
			       .proto = proto, .pstate = pstate,
			       .state = SESS_ADOPTED, .sup_kept = true };
	if (s->pidfd < 0)
		s->pidfd = -1;
	if (s->sock >= 0)
		nonblocking(s->sock);
	for (uint32_t i = 0; i < rec->nregions; i++)
		regs[i] = (struct fl_region_desc){
			.addr = rr[i].addr, .len = rr[i].len,
			.page_size = rr[i].page_size,
			.src_offset = rr[i].src_offset };
	s->next = d->sessions;
	d->sessions = s;
	d->nsessions++;
	ret = rec->nblob || f->n > SUP_NFDS ?
	      proto->restore(s->pstate, sup_blob(rec), rec->nblob,
			     f->fd + SUP_NFDS, f->n - SUP_NFDS) : 0;
	if (ret >= 0)
		ret = session_engine(d, s, regs, (int)rec->nregions);
	if (ret >= 0)
		ret = session_to(s, SESS_SERVING, "taken over: serving");
	if (ret < 0) {	/* the supervisor forgets it too (SUP_DROP) */
		char why[320];

		snprintf(why, sizeof(why), "cannot take it over: %s",
			 fl_last_error());
		session_to(s, SESS_DRAINING, why);
	}
	free(regs);
}

/*
 * Did the read a dead server had under way take nothing?  Only if it was
 * the handshake's first (nothing kept) and the client's first bytes are
 * still queued with its descriptors on them (a client sends its uffd with
 * its first bytes, as Firecracker does): a peek shows them.  A read that
 * took a prefix leaves the rest without the fd; one that took it all
 * leaves nothing.
 */
static bool read_took_nothing(struct session *s, const struct sup_rec *rec,
			      int nkept)
{
	struct sock_fds f;
	char c;
	bool fds;

	if (rec->nblob || nkept)
		return false;
	if (sock_recv_fds(s->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT, &f,
			  SOCK_FDS_MAX) != 1)
		return false;
	fds = f.n + f.dropped > 0 && !f.ctrunc;
	sock_fds_close(&f);	/* the peek's copies are ours */
	return fds;
}

/*
 * A client whose handshake the last server had accepted, its protocol's
 * state restored from what the supervisor kept.  If that server had begun
 * a read, what it read (the uffd, maybe) died with it: the client is
 * killed, as any refused client that may have handed over its uffd;
 * unless that read took nothing (read_took_nothing()).
 */
static void adopt_pending(struct daemon *d, const struct proto_ops *proto,
			  const struct sup_rec *rec, struct sock_fds *f)
{
	int nkept = f->n - 1;

	nonblocking(f->fd[SUP_SOCK]);
	struct session *s = session_new(d, proto, f->fd[SUP_SOCK], rec->id,
					rec->t_start);

	if (!s) {
		f->fd[SUP_SOCK] = -1;
		for (int i = 1; i < f->n; i++)
			close(f->fd[i]);
		return;
	}
	s->sup_kept = true;
	s->nfds = nkept;
	/* Kept at accept, before the server that died could check it. */
	if (!uid_allowed(d->cfg, s->uid)) {
		session_to(s, SESS_REFUSED, uid_refusal(d->cfg));
		return;
	}
	if (rec->flags & SUP_WAS_READING && read_took_nothing(s, rec,
								 nkept)) {
		/* Read anew, whole, when its socket polls in. */
		slog(s, "taken over: its handshake, still unread when the "
		     "server reading it died");
		return;
	}
	/* The protocol's state as kept; its descriptors are its own now. */
	int ret = proto->restore(s->pstate, sup_blob(rec), rec->nblob,
				 f->fd + 1, nkept);

	if (rec->flags & SUP_WAS_READING) {
		s->nfds = 1;	/* may have been handed over, to the dead server */
		session_to(s, SESS_REFUSED, "handshake cut short: the server reading it died");
		return;
	}
	slog(s, "taken over: its handshake (%u bytes kept)", rec->nblob);
	s->got_bytes = rec->nblob > 0;
	if (proto->named && ret >= 0)	/* those are sessions of their own */
		s->named = proto->named(s->pstate);
	handshake_fed(d, s, ret);
}

/*
 * Supervised: the sessions a server before this one was serving, handed
 * over by the supervisor, then SUP_ADOPT_END with the last session id.
 */
/*
 * A session kept by a server that spoke a protocol this one does not (a
 * downgrade): nobody here can serve its uffd, so its client is killed
 * through its socket's pidfd (never left asleep), and the supervisor
 * forgets it (else every restart would hand it over again).
 */
static void drop_unknown(struct daemon *d, const struct sup_rec *rec,
			 struct sock_fds *f)
{
	int pidfd = f->n > 0 ? sock_peer_pidfd(f->fd[0], false) : -1;
	bool killed = f->n > 1 && pidfd >= 0 &&
		      proc_pidfd_signal(pidfd, SIGKILL) == 0;

	swarn(NULL, "session %d: its protocol '%s' is not spoken here: "
	     "dropped%s", rec->id, rec->proto, killed ? "; client killed "
	     "(its uffd would never be served)" : f->n > 1 ? "; its client "
	     "cannot be killed: its faults will hang" : "");
	if (pidfd >= 0)
		close(pidfd);
	sock_fds_close(f);
	sup_drop_id(d, rec->id);
}

/*
 * Sessions held for a connection that is not among those taken over: it
 * completed (or ended) after they were kept, so nothing holds them now.
 */
static void release_orphans(struct daemon *d)
{
	for (struct session *s = d->sessions; s; s = s->next) {
		struct session *c = d->sessions;

		if (!s->held)
			continue;
		while (c && c->id != s->conn)
			c = c->next;
		if (!c)
			session_release(d, s->conn);
	}
}

void adopt_sessions(struct daemon *d)
{
	struct sup_rec *rec = malloc(SUP_REC_MAX);
	struct sock_fds f;
	int n = 0;

	for (; rec;) {
		int ret = sup_recv(d->sup_fd, rec, &f);

		if (ret == -EBADMSG)
			continue;
		if (ret < 0 || rec->kind == SUP_ADOPT_END) {
			if (ret == 0 && rec->id > d->next_id)
				d->next_id = rec->id;
			break;
		}
		const struct proto_ops *proto = proto_find(rec->proto);

		if (!proto) {
			drop_unknown(d, rec, &f);
			continue;
		}
		if (rec->kind == SUP_ADOPT && rec->flags & SUP_NO_SOCK &&
		    f.n < SOCK_FDS_MAX)
			no_sock(&f);
		if (rec->kind == SUP_ADOPT && f.n >= SUP_NFDS) {
			adopt_one(d, proto, rec, &f);
			n++;
			continue;
		} else if (rec->kind == SUP_ADOPT_PENDING && f.n >= 1) {
			adopt_pending(d, proto, rec, &f);
			n++;
			continue;
		}
		sock_fds_close(&f);
	}
	free(rec);
	release_orphans(d);
	if (n)
		slog(NULL, "took over %d session%s from the server before",
		     n, n == 1 ? "" : "s");
}

/*
 * SIGUSR2 from the supervisor (its SIGHUP: an upgrade): stop issuing
 * ioctls for every session and exit at once; the next server takes them
 * over from the supervisor.  Nothing is closed or unlinked.
 */
void hand_over_and_exit(struct daemon *d)
{
	for (struct session *s = d->sessions; s; s = s->next)
		if (s->engine)
			fl_engine_detach(s->engine);
	slog(NULL, "handing %d session%s over to the next server",
	     d->nsessions, d->nsessions == 1 ? "" : "s");
	_exit(0);
}
