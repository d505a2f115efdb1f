// SPDX-License-Identifier: Apache-2.0
/*
 * gate.c - the engine's only way to the kernel's fills and wakes, and its
 * end: every fill, poison and wake passes the gate that fl_engine_detach()
 * closes; engine_finish() ends the threads when the client is gone.
 *
 * Decision: one gate, counted, rather than a check per caller: detach
 * waits for the ioctls under way, so after it none can land in memory the
 * client has mapped anew (docs/architecture.md, "Which thread may issue
 * ioctls").
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "engine/gate.h"
#include "util/error.h"

/* ---- the ioctl gate ----------------------------------------------------- */

static bool gate_enter(struct fl_engine *e)
{
	atomic_fetch_add(&e->in_ioctl, 1);
	if (!atomic_load(&e->detached))
		return true;
	atomic_fetch_sub(&e->in_ioctl, 1);
	return false;
}

/*
 * Every fill, poison and wake of the engine passes here: once the engine
 * is detached it answers -ESRCH (the client is gone) without an ioctl.
 * Every fill wakes the threads waiting in its range; while writes are
 * tracked a COPY maps its pages write-protected, so that their first
 * write is seen (fill.c copies zeros rather than map the zero page then).
 */
int engine_fill(struct fl_engine *e, enum uffd_fill_op op, uint64_t dst,
		uint64_t src, uint64_t len, uint64_t *done)
{
	uint64_t mode = op == UFFD_OP_COPY && atomic_load(&e->track) ?
			UFFDIO_COPY_MODE_WP : 0;

	*done = 0;
	if (!gate_enter(e))
		return -ESRCH;
	int ret = uffd_fill(e->uffd, op, dst, src, len, mode, done);

	atomic_fetch_sub(&e->in_ioctl, 1);
	return ret;
}

int engine_wake(struct fl_engine *e, uint64_t start, uint64_t len)
{
	if (!gate_enter(e))
		return -ESRCH;
	int ret = uffd_wake(e->uffd, start, len);

	atomic_fetch_sub(&e->in_ioctl, 1);
	return ret;
}

int engine_unprotect(struct fl_engine *e, uint64_t start, uint64_t len)
{
	if (!gate_enter(e))
		return -ESRCH;
	int ret = uffd_writeprotect(e->uffd, start, len, false, false);

	atomic_fetch_sub(&e->in_ioctl, 1);
	return ret;
}

/* ---- the end ------------------------------------------------------------ */

void engine_finish(struct fl_engine *e)
{
	atomic_store(&e->finished, true);
	uint64_t one = 1;

	if (write(e->stopfd, &one, sizeof(one)) < 0) {
		/* the counter cannot overflow with one write per finish */
	}
}

/* Keep the first failure's message (this thread's last error) for later. */
void note_failure(struct fl_engine *e)
{
	pthread_mutex_lock(&e->why_lock);
	if (!e->why[0])
		snprintf(e->why, sizeof(e->why), "%s", fl_last_error());
	pthread_mutex_unlock(&e->why_lock);
}
