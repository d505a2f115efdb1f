// SPDX-License-Identifier: Apache-2.0
/*
 * criu_ps.c - a CRIU dump's lazy pages read from CRIU's page server
 * (criu_ps.h): `criu dump --lazy-pages --address A --port P` keeps them on
 * the dumping host and serves them until the restoring side hangs up.
 *
 * Decisions: one connection, made at open, as the dumping criu accepts
 * exactly one and exits when it ends; so nothing reconnects, and a broken
 * link fails every read after it (the engine poisons what it cannot have,
 * or kills, as --on-source-error says).  Requests go one at a time under
 * a mutex: the server answers in order from one thread, and the engine
 * asks in chunks of up to 2 MiB, so little is lost.  The server may
 * answer fewer pages than asked (its buffers end there): asked again for
 * the rest.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "faultline.h"
#include "format/criu.h"
#include "source/criu_ps.h"
#include "source/source.h"
#include "util/error.h"
#include "util/sock.h"

#define CONNECT_MS	5000
#define ANSWER_MS	60000	/* a live server answers in far less */
#define CLOSE_MS	2000

/* A lazy range: off in the source, the task and address it is at. */
struct ps_range {
	uint64_t off;
	uint64_t len;
	uint64_t addr;
	int32_t pid;
};

struct source_ps {
	struct fl_source base;
	pthread_mutex_t mu;	/* one request at a time on fd */
	int fd;			/* -1 once the link broke */
	int err;		/* why it broke */
	char why[200];		/* and what was said then */
	bool wide;
	int n;
	struct ps_range *r;
};

#define to_ps(s) ((struct source_ps *)(s))

/* ---- the header ------------------------------------------------------------ */

size_t criu_ps_encode(uint8_t *buf, bool wide, const struct criu_ps_hdr *h)
{
	uint32_t nr32 = (uint32_t)h->nr_pages;

	memset(buf, 0, CRIU_PS_HDR_WIDE);
	memcpy(buf, &h->cmd, 4);
	if (wide) {		/* u32 cmd, 4 bytes of padding, 3 u64 */
		memcpy(buf + 8, &h->nr_pages, 8);
		memcpy(buf + 16, &h->vaddr, 8);
		memcpy(buf + 24, &h->dst_id, 8);
		return CRIU_PS_HDR_WIDE;
	}
	memcpy(buf + 4, &nr32, 4);
	memcpy(buf + 8, &h->vaddr, 8);
	memcpy(buf + 16, &h->dst_id, 8);
	return CRIU_PS_HDR_NARROW;
}

void criu_ps_decode(const uint8_t *buf, bool wide, struct criu_ps_hdr *h)
{
	uint32_t nr32;

	memcpy(&h->cmd, buf, 4);
	if (wide) {
		memcpy(&h->nr_pages, buf + 8, 8);
		memcpy(&h->vaddr, buf + 16, 8);
		memcpy(&h->dst_id, buf + 24, 8);
		return;
	}
	memcpy(&nr32, buf + 4, 4);
	h->nr_pages = nr32;
	memcpy(&h->vaddr, buf + 8, 8);
	memcpy(&h->dst_id, buf + 16, 8);
}

int criu_ps_check(const struct criu_ps_hdr *q, const struct criu_ps_hdr *a)
{
	const char *why = NULL;

	if ((a->cmd & CRIU_PS_CMD_MASK) != CRIU_PS_ADD_F)
		why = "not PS_IOV_ADD_F";
	else if (a->dst_id != q->dst_id)
		why = "for another task";
	else if (a->vaddr != q->vaddr)
		why = "at another address";
	else if (!a->nr_pages)
		why = "no pages";
	else if (a->nr_pages > q->nr_pages)
		why = "more pages than asked";
	if (!why)
		return 0;
	return fl_err(-EPROTO, "the page server answered task %" PRIu64
		      " 0x%" PRIx64 " +%" PRIu64 " pages with command 0x%x, "
		      "task %" PRIu64 " 0x%" PRIx64 " +%" PRIu64 ": %s",
		      q->dst_id, q->vaddr, q->nr_pages, a->cmd, a->dst_id,
		      a->vaddr, a->nr_pages, why);
}

/* ---- the link -------------------------------------------------------------- */

/* Pages [vaddr, vaddr+len) of task pid into buf: 0 or -errno. */
static int ps_get(struct source_ps *ps, int32_t pid, uint64_t vaddr,
		  void *buf, uint64_t len)
{
	uint8_t hb[CRIU_PS_HDR_WIDE];

	while (len) {
		uint64_t max = ps->wide ? UINT64_MAX : UINT32_MAX;
		struct criu_ps_hdr q = {
			.cmd = CRIU_PS_GET, .vaddr = vaddr,
			.nr_pages = len / CRIU_PAGE_SIZE < max ?
				    len / CRIU_PAGE_SIZE : max,
			.dst_id = (uint64_t)pid,
		}, a;
		size_t hl = criu_ps_encode(hb, ps->wide, &q);
		int ret = send_full(ps->fd, hb, hl);

		if (!ret)
			ret = recv_full(ps->fd, hb, hl);
		if (ret)
			return fl_err(ret, "%s: %s", ps->base.desc,
				      ret == -ECONNRESET ? "hung up (it has no "
				      "such pages, or it is gone)" :
				      strerror(-ret));
		criu_ps_decode(hb, ps->wide, &a);
		if ((ret = criu_ps_check(&q, &a)))
			return ret;
		uint64_t n = a.nr_pages * CRIU_PAGE_SIZE;

		if ((ret = recv_full(ps->fd, buf, n)))
			return fl_err(ret, "%s: the pages' bytes: %s",
				      ps->base.desc, strerror(-ret));
		atomic_fetch_add(&ps->base.bytes_fetched, n);
		buf = (char *)buf + n;
		vaddr += n;
		len -= n;
	}
	return 0;
}

/* The range holding off, or NULL. */
static const struct ps_range *ps_find(const struct source_ps *ps,
				      uint64_t off)
{
	int lo = 0, hi = ps->n;

	while (lo < hi) {		/* the first range ending past off */
		int mid = lo + (hi - lo) / 2;

		if (ps->r[mid].off + ps->r[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ps->n && ps->r[lo].off <= off ? &ps->r[lo] : NULL;
}

static int ps_read_locked(struct source_ps *ps, char *buf, size_t len,
			  uint64_t off)
{
	while (len) {
		const struct ps_range *r = ps_find(ps, off);
		uint64_t n;
		int ret;

		if (!r)
			return fl_err(-EIO, "%s: offset %" PRIu64 " is in no "
				      "lazy range", ps->base.desc, off);
		n = r->off + r->len - off < len ? r->off + r->len - off : len;
		ret = ps_get(ps, r->pid, r->addr + (off - r->off), buf, n);
		if (ret)
			return ret;
		buf += n;
		off += n;
		len -= n;
	}
	return 0;
}

static int ps_read(struct fl_source *s, void *buf, size_t len, uint64_t off)
{
	struct source_ps *ps = to_ps(s);
	int ret;

	if (off > s->size || len > s->size - off)
		return -ERANGE;
	if ((off | len) % CRIU_PAGE_SIZE)
		return fl_err(-EINVAL, "%s: a read of %zu bytes at %" PRIu64
			      ": not whole pages", s->desc, len, off);
	pthread_mutex_lock(&ps->mu);
	if (ps->fd < 0) {
		ret = fl_err(ps->err, "no link to it: %s", ps->why);
	} else if ((ret = ps_read_locked(ps, buf, len, off))) {
		/* Mid-answer, the stream's place is lost: no more reads. */
		close(ps->fd);
		ps->fd = -1;
		ps->err = ret;
		snprintf(ps->why, sizeof(ps->why), "%s", fl_last_error());
	}
	pthread_mutex_unlock(&ps->mu);
	return ret;
}

/* PS_IOV_CLOSE, and its status read, so that the dumping criu exits 0. */
static void ps_close(struct source_ps *ps)
{
	struct criu_ps_hdr q = { .cmd = CRIU_PS_CLOSE };
	uint8_t hb[CRIU_PS_HDR_WIDE];
	int32_t status;

	if (ps->fd < 0)
		return;
	sock_set_timeout(ps->fd, SO_RCVTIMEO, CLOSE_MS);
	if (!send_full(ps->fd, hb, criu_ps_encode(hb, ps->wide, &q)))
		recv_full(ps->fd, &status, sizeof(status));
	close(ps->fd);
	ps->fd = -1;
}

static void ps_destroy(struct fl_source *s)
{
	struct source_ps *ps = to_ps(s);

	ps_close(ps);
	pthread_mutex_destroy(&ps->mu);
	free(ps->r);
	free(ps);
}

static const struct fl_source_ops ps_ops = {
	.name = "criu-page-server",
	.read = ps_read,
	.destroy = ps_destroy,
};

/* Every task's lazy ranges, at their offsets in the source. */
static int ps_ranges(struct source_ps *ps, const struct criu_set *set)
{
	int n = 0;

	for (int i = 0; i < set->ntasks; i++)
		n += set->tasks[i].nranges;
	ps->r = calloc(n ? (size_t)n : 1, sizeof(*ps->r));
	if (!ps->r)
		return -ENOMEM;
	for (int i = 0; i < set->ntasks; i++) {
		const struct criu_task *t = &set->tasks[i];

		for (int k = 0; k < t->nranges; k++)
			ps->r[ps->n++] = (struct ps_range){
				.off = t->base + t->ranges[k].off,
				.len = t->ranges[k].len,
				.addr = t->ranges[k].addr, .pid = t->pid };
	}
	return 0;
}

int source_criu_ps_open(const char *host, const char *port,
			const struct criu_set *set, bool lost_ok,
			struct fl_source **out)
{
	struct source_ps *ps = calloc(1, sizeof(*ps));
	char desc[300], why[200] = "";
	int ret;

	if (!ps)
		return -ENOMEM;
	snprintf(desc, sizeof(desc), "CRIU page server %s:%s", host, port);
	ps->wide = set->wide;
	ret = ps_ranges(ps, set);
	if (ret == 0) {
		ps->fd = sock_connect_tcp(host, port, CONNECT_MS, why,
					  sizeof(why));
		if (ps->fd < 0)
			ret = fl_err(ps->fd, "%s: %s", desc, why[0] ? why :
				     strerror(-ps->fd));
	}
	if (ret < 0 && (ret == -ENOMEM || !lost_ok)) {
		free(ps->r);
		free(ps);
		return ret;
	}
	if (ret < 0) {
		ps->err = ret;
		snprintf(ps->why, sizeof(ps->why), "%s", fl_last_error());
	} else {
		sock_tune_tcp(ps->fd);
		sock_set_timeout(ps->fd, SO_RCVTIMEO, ANSWER_MS);
		sock_set_timeout(ps->fd, SO_SNDTIMEO, ANSWER_MS);
	}
	pthread_mutex_init(&ps->mu, NULL);
	source_init(&ps->base, &ps_ops, set->pages_total, desc);
	ps->base.remote = true;
	*out = &ps->base;
	return 0;
}
