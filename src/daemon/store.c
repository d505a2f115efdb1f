// SPDX-License-Identifier: Apache-2.0
/*
 * store.c - the store channel's records (both ends use them), and what the
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
#include "daemon/store.h"

struct store_rec *store_rec_new(uint32_t kind, int id, uint32_t nregions,
				uint32_t nblob)
{
	size_t len = sizeof(struct store_rec) +
		     (size_t)nregions * sizeof(struct store_region) + nblob;
	struct store_rec *r;

	if (len > STORE_REC_MAX)
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

static bool rec_valid(const struct store_rec *r, size_t n)
{
	return n >= sizeof(*r) && n <= STORE_REC_MAX &&
	       r->nregions <= STORE_REC_MAX / sizeof(struct store_region) &&
	       r->nblob <= STORE_REC_MAX && n == store_len(r) &&
	       memchr(r->proto, 0, sizeof(r->proto));
}

int store_send(int fd, const struct store_rec *rec, const int *fds,
	       int nfds)
{
	if (nfds < 0 || nfds > STORE_FDS_MAX ||
	    !rec_valid(rec, store_len(rec)))
		return -EMSGSIZE;
	return sock_send_fds(fd, rec, store_len(rec), fds, nfds);
}

int store_recv(int fd, struct store_rec *rec, struct sock_fds *f)
{
	ssize_t n = sock_recv_fds(fd, rec, STORE_REC_MAX, 0, f,
				  STORE_FDS_MAX);

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
static struct store_rec *rec_of(struct session *s, uint32_t kind,
				int nregions, struct proto_keep *k)
{
	struct store_rec *r;

	*k = (struct proto_keep){ 0 };
	if (s->pstate && s->proto->keep(s->pstate, k) < 0)
		return NULL;
	r = store_rec_new(kind, s->id, (uint32_t)nregions, (uint32_t)k->len);
	if (!r || k->len > STORE_REC_MAX) {
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
		memcpy(store_blob(r), k->blob, k->len);
	free(k->blob);
	k->blob = NULL;
	return r;
}

bool store_pending(struct daemon *d, int id, int sock, uint64_t t_start)
{
	struct store_rec r = { .kind = STORE_PENDING, .id = id,
			       .t_start = t_start };

	snprintf(r.proto, sizeof(r.proto), "%s", d->proto->name);
	return store_send(d->store_fd, &r, &sock, 1) == 0;
}

void store_want(struct daemon *d)
{
	struct store_rec r = { .kind = STORE_WANT };

	snprintf(r.proto, sizeof(r.proto), "%s", d->proto->name);
	store_send(d->store_fd, &r, NULL, 0);
}

void store_name(struct daemon *d, int tmp, int id)
{
	struct store_rec r = { .kind = STORE_NAME, .id = id, .conn = tmp };

	store_send(d->store_fd, &r, NULL, 0);
}

void store_drop_id(struct daemon *d, int id)
{
	struct store_rec r = { .kind = STORE_DROP, .id = id };

	store_send(d->store_fd, &r, NULL, 0);
}

void store_reading(struct daemon *d, struct session *s)
{
	struct store_rec r = { .kind = STORE_READING, .id = s->id };

	if (s->stored)
		store_send(d->store_fd, &r, NULL, 0);
}

/*
 * What the read took, as the protocol's state now is: the supervisor
 * replaces what it kept with it.  A state too large for a record is not
 * sent: the session stays "reading", and a server after this one refuses
 * it (and kills the client) rather than serve it wrong.
 */
void store_data(struct daemon *d, struct session *s)
{
	struct proto_keep k;
	struct store_rec *r;

	if (!s->stored)
		return;
	r = rec_of(s, STORE_DATA, 0, &k);
	if (r)
		store_send(d->store_fd, r, k.fds, k.nfds);
	free(r);
}

/*
 * A session without a socket (named by a connection, or forked) sends its
 * descriptors from STORE_UFFD on (STORE_NO_SOCK), and the connection that
 * named it while that is still under way (its prefetch is held until then).
 * Sent, s->stored is set: the supervisor keeps it, or holds what it kept
 * of its handshake until it says (STORE_KEPT) or the session ends.
 */
int store_session(struct daemon *d, struct session *s,
		   const struct fl_region_desc *regs, int n)
{
	int fds[STORE_NFDS + PROTO_KEEP_FDS] = { s->sock,
						 fl_engine_uffd(s->engine),
						 s->state_fd };
	int *from = s->sock < 0 ? fds + STORE_UFFD : fds;
	struct proto_keep k;
	struct store_rec *r = rec_of(s, STORE_SESSION, n, &k);
	int ret = -EMSGSIZE;

	if (r) {
		struct store_region *rr = store_regions(r);

		if (d->sup_accepts)
			r->flags |= STORE_ACK;
		if (s->sock < 0) {
			r->flags |= STORE_NO_SOCK;
			r->conn = s->held ? s->conn : 0;
		}

		for (int i = 0; i < n; i++)
			rr[i] = (struct store_region){ regs[i].addr,
						       regs[i].len,
						       regs[i].page_size,
						       regs[i].src_offset };
		memcpy(fds + STORE_NFDS, k.fds, sizeof(int) * (size_t)k.nfds);
		ret = store_send(d->store_fd, r, from,
				 (int)(fds + STORE_NFDS - from) + k.nfds);
		free(r);
	}
	if (ret == 0)
		s->stored = true;
	return ret;
}

void store_drop(struct daemon *d, struct session *s)
{
	if (s->stored)
		store_drop_id(d, s->id);
}
