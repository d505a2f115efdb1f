// SPDX-License-Identifier: Apache-2.0
/*
 * proto_criu.c - CRIU's lazy-pages socket as the daemon's protocol
 * (proto.h), as `criu restore --lazy-pages` speaks it (criu/uffd.c:
 * send_uffd(), lazy_pages_finish_restore(); the same in CRIU 3.17 and
 * 4.x): for each restored task, behind a lock, a 4-byte int pid (the pid
 * the images name, in the task's pid namespace), then for a live task a
 * 1-byte message carrying its uffd in SCM_RIGHTS; a zombie sends -pid and
 * nothing else.  After the last of pstree.img's tasks, u32 0x52535446
 * ("RSTF"): the restore finished; the restorer then hangs up.
 *
 * Decision: each task is named as a client the moment its uffd arrives
 * (named()), because the restored tasks may run and fault before the last
 * uffd is sent; its regions are its lazy ranges at their place in the
 * dump's pages, as the daemon's source says (a CRIU dump's source,
 * fl_source_criu_task(): the daemon knows no image of CRIU's), and
 * anything else registered reads as zeros (the engine's answer to memory
 * no region describes).  A pid is never looked up or signalled: it is
 * another namespace's.  Supervised like `faultline serve`: each task's
 * session is kept as any other, the connection's place in the stream
 * too (criu_keep()), so a server killed mid-restore is taken over.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/proto.h"
#include "util/error.h"

#define CRIU_RESTORE_FINISHED	0x52535446u	/* "RSTF" */
#define CRIU_FDS_QUEUED		8

struct named {
	int uffd;
	int32_t pid;
	unsigned int nregions;
	const struct fl_region_desc *regions;	/* the source's */
};

struct criu_st {
	const struct fl_source *src;	/* the dump's */
	int ntasks;
	bool *seen;		/* per task of the dump */
	int tasks;		/* pids received (zombies too) */
	uint8_t word[4];
	int have;		/* bytes of word */
	int32_t pid;		/* its uffd's byte is next (0: a pid is) */
	int fds[CRIU_FDS_QUEUED];
	int nfds;
	struct named *named;
	int nnamed;
	bool done;		/* the terminator came */
};

static int criu_open(void **out, uint64_t src_size, const void *arg)
{
	const struct fl_source *src = arg;
	int n = src ? fl_source_criu_tasks(src) : -ENODATA;
	struct criu_st *st;

	(void)src_size;
	if (n < 0)
		return fl_err(-EINVAL, "the criu protocol serves a dump: "
			      "`faultline lazy-pages -D DIR`");
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->src = src;
	st->ntasks = n;
	st->seen = calloc((size_t)n + 1, sizeof(*st->seen));
	st->named = calloc((size_t)n + 1, sizeof(*st->named));
	if (!st->seen || !st->named) {
		free(st->seen);
		free(st->named);
		free(st);
		return -ENOMEM;
	}
	*out = st;
	return 0;
}

/* The index of the dump's task pid, or -1. */
static int index_of(const struct criu_st *st, int32_t pid)
{
	pid_t p;

	for (int i = 0; i < st->ntasks; i++)
		if (fl_source_criu_task(st->src, i, &p, NULL, NULL) == 0 &&
		    p == pid)
			return i;
	return -1;
}

/* pid (> 0) is a task of the dump not seen yet: its index, or -EINVAL. */
static int task_of(struct criu_st *st, int32_t pid, const char *as)
{
	int i = index_of(st, pid);

	if (i < 0)
		return fl_err(-EINVAL, "%s %d: not a task of pstree.img", as,
			      pid);
	if (st->seen[i])
		return fl_err(-EINVAL, "task %d sent twice", pid);
	st->seen[i] = true;
	return i;
}

/* The uffd of task pid arrived: a client, its lazy ranges its regions. */
static int name_task(struct criu_st *st, int32_t pid, int uffd)
{
	struct named *n = &st->named[st->nnamed];
	int ret = fl_source_criu_task(st->src, index_of(st, pid), NULL,
				      &n->regions, &n->nregions);

	if (ret < 0)
		return ret;
	n->pid = pid;
	n->uffd = uffd;
	st->nnamed++;
	return 0;
}

/* One u32 of the stream: a pid, a zombie's -pid, or the terminator. */
static int word(struct criu_st *st)
{
	int32_t v;

	memcpy(&v, st->word, 4);
	st->have = 0;
	if (st->tasks == st->ntasks) {
		if ((uint32_t)v != CRIU_RESTORE_FINISHED)
			return fl_err(-EINVAL, "0x%08x after the last of %d "
				      "tasks: expected the end of the restore "
				      "(0x%08x)", (uint32_t)v, st->tasks,
				      CRIU_RESTORE_FINISHED);
		st->done = true;
		return 0;
	}
	if ((uint32_t)v == CRIU_RESTORE_FINISHED)
		return fl_err(-EINVAL, "the restore ended after %d of the %d "
			      "tasks of pstree.img", st->tasks,
			      st->ntasks);
	if (v == 0 || v == INT32_MIN)
		return fl_err(-EINVAL, "pid %d: not a pid", v);
	int ret = task_of(st, v < 0 ? -v : v, v < 0 ? "zombie" : "pid");

	if (ret < 0)
		return ret;
	if (v < 0)
		st->tasks++;	/* a zombie: no uffd, no memory */
	else
		st->pid = v;
	return 0;
}

static int criu_feed(void *p, const char *buf, size_t len, const int *fds,
		     int nfds)
{
	struct criu_st *st = p;
	int ret = 0;

	for (int i = 0; i < nfds; i++) {
		if (st->nfds == CRIU_FDS_QUEUED || st->done) {
			close(fds[i]);
			ret = fl_err(-EINVAL, "a descriptor with no task to "
				     "take it");
			continue;
		}
		st->fds[st->nfds++] = fds[i];
	}
	for (size_t i = 0; i < len && ret == 0; i++) {
		if (st->done) {
			ret = fl_err(-EINVAL, "%zu bytes after the end of the "
				     "restore", len - i);
		} else if (st->pid) {
			/* The 1-byte message its uffd came with. */
			if (!st->nfds) {
				ret = fl_err(-EINVAL, "task %d: no uffd in "
					     "SCM_RIGHTS", st->pid);
				break;
			}
			ret = name_task(st, st->pid, st->fds[0]);
			if (ret == 0) {
				memmove(st->fds, st->fds + 1,
					sizeof(int) * (size_t)--st->nfds);
				st->pid = 0;
				st->tasks++;
			}
		} else {
			st->word[st->have++] = (uint8_t)buf[i];
			if (st->have == 4)
				ret = word(st);
		}
	}
	/* A descriptor comes with its task's byte, in the same read. */
	if (ret == 0 && st->nfds)
		ret = fl_err(-EINVAL, "a descriptor with no task to take it");
	if (ret < 0)
		return ret;
	if (st->done && !st->nnamed)
		return fl_err(-ENODATA, "every task of the dump is a zombie: "
			      "no memory to serve");
	return st->done ? st->nnamed : 0;
}

static int criu_client(void *p, int i, struct proto_client *out)
{
	struct criu_st *st = p;

	if (i < 0 || i >= st->nnamed)
		return -EINVAL;
	*out = (struct proto_client){ .uffd = st->named[i].uffd,
				      .pid = st->named[i].pid,
				      .nregions = (int)st->named[i].nregions,
				      .regions = st->named[i].regions };
	st->named[i].uffd = -1;		/* the caller's now */
	return 0;
}

static int criu_named(void *p)
{
	return ((struct criu_st *)p)->nnamed;
}

/*
 * What the supervisor keeps of a connection: where the stream is, and the
 * descriptors queued for a task not named yet.  Kept after the named
 * clients became sessions (they are kept as sessions of their own), so a
 * named client's uffd is never in it.
 */
struct criu_kept {
	int32_t tasks, have, pid, nnamed;
	uint8_t word[4];
	uint32_t done;
	uint32_t ntasks;
	uint8_t seen[];		/* ntasks bytes */
};

static int criu_keep(void *p, struct proto_keep *k)
{
	struct criu_st *st = p;
	int n = st->ntasks;
	struct criu_kept *kp;

	for (int i = 0; i < st->nnamed; i++)
		if (st->named[i].uffd >= 0)
			return -EBUSY;	/* not served yet: not kept */
	kp = calloc(1, sizeof(*kp) + (size_t)n);
	if (!kp)
		return -ENOMEM;
	*kp = (struct criu_kept){ .tasks = st->tasks, .have = st->have,
				  .pid = st->pid, .nnamed = st->nnamed,
				  .done = st->done, .ntasks = (uint32_t)n };
	memcpy(kp->word, st->word, sizeof(kp->word));
	for (int i = 0; i < n; i++)
		kp->seen[i] = st->seen[i];
	k->blob = kp;
	k->len = sizeof(*kp) + (size_t)n;
	memcpy(k->fds, st->fds, sizeof(int) * (size_t)st->nfds);
	k->nfds = st->nfds;
	return 0;
}

/* Named clients before a takeover are sessions already: slots only. */
static int criu_restore(void *p, const void *blob, size_t len,
			const int *fds, int nfds)
{
	struct criu_st *st = p;
	const struct criu_kept *kp = blob;
	int n = st->ntasks;

	if (len != sizeof(*kp) + (size_t)n || kp->ntasks != (uint32_t)n ||
	    kp->tasks < 0 || kp->tasks > n || kp->nnamed < 0 ||
	    kp->nnamed > kp->tasks || kp->have < 0 || kp->have > 3 ||
	    nfds > CRIU_FDS_QUEUED) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return fl_err(-EINVAL, "the kept state of a CRIU connection "
			      "does not fit this dump");
	}
	st->tasks = kp->tasks;
	st->have = kp->have;
	st->pid = kp->pid;
	st->done = kp->done;
	memcpy(st->word, kp->word, sizeof(st->word));
	for (int i = 0; i < n; i++)
		st->seen[i] = kp->seen[i];
	for (int i = 0; i < kp->nnamed; i++)
		st->named[i].uffd = -1;
	st->nnamed = kp->nnamed;
	memcpy(st->fds, fds, sizeof(int) * (size_t)nfds);
	st->nfds = nfds;
	return st->done ? st->nnamed : 0;
}

static void criu_st_free(void *p)
{
	struct criu_st *st = p;

	for (int i = 0; i < st->nfds; i++)
		close(st->fds[i]);
	for (int i = 0; i < st->nnamed; i++) {
		if (st->named[i].uffd >= 0)
			close(st->named[i].uffd);
	}
	free(st->named);
	free(st->seen);
	free(st);
}

const struct proto_ops proto_criu = {
	.name		= "criu",
	.max_fds	= CRIU_FDS_QUEUED,
	.unfinished	= "the restore's end (0x52535446) never came",
	.end_when_restored = true,
	.forks		= true,
	.open		= criu_open,
	.feed		= criu_feed,
	.client		= criu_client,
	.named		= criu_named,
	.keep		= criu_keep,
	.restore	= criu_restore,
	.free		= criu_st_free,
};
