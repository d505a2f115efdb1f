// SPDX-License-Identifier: Apache-2.0
/*
 * supchan.c - the supervisor channel's records (both ends use them), and what the
 * server tells its supervisor of each session: accepted, reading, the
 * handshake's state after a read, serving, ended.
 *
 * Decision: what a protocol needs kept travels as its own blob and fds
 * (proto.h keep()), so the supervisor stores any protocol's sessions
 * without parsing a byte a client sent.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/supchan.h"

struct sup_rec *sup_rec_new(uint32_t kind, int id, uint32_t nregions,
				uint32_t nblob)
{
	size_t len = sizeof(struct sup_rec) +
		     (size_t)nregions * sizeof(struct sup_region) + nblob;
	struct sup_rec *r;

	if (len > SUP_REC_MAX)
		return NULL;
	r = calloc(1, len);
	if (!r)
		return NULL;
	r->kind = kind;
	r->id = id;
	r->nregions = nregions;
	r->nblob = nblob;
	return r;
}

static bool rec_valid(const struct sup_rec *r, size_t n)
{
	return n >= sizeof(*r) && n <= SUP_REC_MAX &&
	       r->nregions <= SUP_REC_MAX / sizeof(struct sup_region) &&
	       r->nblob <= SUP_REC_MAX && n == sup_len(r) &&
	       memchr(r->proto, 0, sizeof(r->proto));
}

int sup_send(int fd, const struct sup_rec *rec, const int *fds,
	       int nfds)
{
	if (nfds < 0 || nfds > SUP_FDS_MAX ||
	    !rec_valid(rec, sup_len(rec)))
		return -EMSGSIZE;
	return sock_send_fds(fd, rec, sup_len(rec), fds, nfds);
}

int sup_recv(int fd, struct sup_rec *rec, struct sock_fds *f)
{
	ssize_t n = sock_recv_fds(fd, rec, SUP_REC_MAX, 0, f,
				  SUP_FDS_MAX);

	if (n < 0)
		return (int)n;
	if (n == 0)
		return -ENODATA;
	if (!rec_valid(rec, (size_t)n) || f->trunc || f->ctrunc ||
	    f->dropped) {
		sock_fds_close(f);
		return rec_valid(rec, (size_t)n) && !f->trunc ? -EMFILE :
		       -EBADMSG;
	}
	return 0;
}

/* ---- the server's side ---------------------------------------------------- */

/* A record of s with its protocol's keep() as the blob; NULL if none fits. */
static struct sup_rec *rec_of(struct session *s, uint32_t kind,
				int nregions, struct proto_keep *k)
{
	struct sup_rec *r;

	*k = (struct proto_keep){ 0 };
	if (s->pstate && s->proto->keep(s->pstate, k) < 0)
		return NULL;
	r = sup_rec_new(kind, s->id, (uint32_t)nregions, (uint32_t)k->len);
	if (!r || k->len > SUP_REC_MAX) {
		free(k->blob);
		free(r);
		return NULL;
	}
	r->pid = s->pid;
	r->uid = s->uid;
	r->t_start = s->t_start;
	r->client_pid = s->client_pid;
	snprintf(r->proto, sizeof(r->proto), "%s", s->proto->name);
	if (k->len)
		memcpy(sup_blob(r), k->blob, k->len);
	free(k->blob);
	k->blob = NULL;
	return r;
}

bool sup_pending(struct daemon *d, int id, int sock, uint64_t t_start)
{
	struct sup_rec r = { .kind = SUP_PENDING, .id = id,
			       .t_start = t_start };

	snprintf(r.proto, sizeof(r.proto), "%s", d->proto->name);
	return sup_send(d->sup_fd, &r, &sock, 1) == 0;
}

void sup_want(struct daemon *d)
{
	struct sup_rec r = { .kind = SUP_WANT };

	snprintf(r.proto, sizeof(r.proto), "%s", d->proto->name);
	sup_send(d->sup_fd, &r, NULL, 0);
}

void sup_name(struct daemon *d, int tmp, int id)
{
	struct sup_rec r = { .kind = SUP_NAME, .id = id, .conn = tmp };

	sup_send(d->sup_fd, &r, NULL, 0);
}

void sup_drop_id(struct daemon *d, int id)
{
	struct sup_rec r = { .kind = SUP_DROP, .id = id };

	sup_send(d->sup_fd, &r, NULL, 0);
}

void sup_reading(struct daemon *d, struct session *s)
{
	struct sup_rec r = { .kind = SUP_READING, .id = s->id };

	if (s->sup_kept)
		sup_send(d->sup_fd, &r, NULL, 0);
}

/*
 * What the read took, as the protocol's state now is: the supervisor
 * replaces what it kept with it.  A state too large for a record is not
 * sent: the session stays "reading", and a server after this one refuses
 * it (and kills the client) rather than serve it wrong.
 */
void sup_data(struct daemon *d, struct session *s)
{
	struct proto_keep k;
	struct sup_rec *r;

	if (!s->sup_kept)
		return;
	r = rec_of(s, SUP_DATA, 0, &k);
	if (r)
		sup_send(d->sup_fd, r, k.fds, k.nfds);
	free(r);
}

/*
 * A session without a socket (named by a connection, or forked) sends its
 * descriptors from SUP_UFFD on (SUP_NO_SOCK), and the connection that
 * named it while that is still under way (its prefetch is held until then).
 * Sent, s->sup_kept is set: the supervisor keeps it, or holds what it kept
 * of its handshake until it says (SUP_KEPT) or the session ends.
 */
int sup_session(struct daemon *d, struct session *s)
{
	const struct sess_region *regs = s->regions;
	int n = s->nregions;
	int fds[SUP_NFDS + PROTO_KEEP_FDS] = { s->sock,
						 fl_engine_uffd(s->engine),
						 s->state_fd };
	int *from = s->sock < 0 ? fds + SUP_UFFD : fds;
	struct proto_keep k;
	struct sup_rec *r = rec_of(s, SUP_SESSION, n, &k);
	int ret = -EMSGSIZE;

	if (r) {
		struct sup_region *rr = sup_regions(r);

		if (d->sup_accepts)
			r->flags |= SUP_ACK;
		if (s->sock < 0) {
			r->flags |= SUP_NO_SOCK;
			r->conn = s->held ? s->conn : 0;
		}

		for (int i = 0; i < n; i++)
			rr[i] = (struct sup_region){ regs[i].addr,
						       regs[i].len,
						       regs[i].page_size,
						       regs[i].src_offset };
		memcpy(fds + SUP_NFDS, k.fds, sizeof(int) * (size_t)k.nfds);
		ret = sup_send(d->sup_fd, r, from,
				 (int)(fds + SUP_NFDS - from) + k.nfds);
		free(r);
	}
	if (ret == 0)
		s->sup_kept = true;
	return ret;
}
