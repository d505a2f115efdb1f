// SPDX-License-Identifier: Apache-2.0
/*
 * reset.c - `faultline vmm --reset N`: the guest runs N times from one
 * snapshot, the in-process engine's reset (fl_engine_reset) before each
 * run but the first; then N runs each after a fresh restore, for
 * comparison.  Every run reads its workload, which must sum to the
 * snapshot's words, then writes the dirty set, whose old words must too:
 * a page the reset missed holds a word one more than the snapshot's.
 *
 * Decision: the VM and its vCPUs stay; only the memory is restored anew
 * (at the same address, so the memslot holds), which is what a reset
 * saves a VMM, and the vCPU threads wait at a barrier meanwhile, so that
 * the times measured are the reset's and the run's, nothing else's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "reset.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int engine_stats(struct vm_run *run, struct fl_stats *s)
{
	int ret = fl_engine_stats(run->mem.e, s);

	if (ret < 0)
		return vmm_fail(ret, "engine stats: %s", fl_last_error());
	return 0;
}

/* One run, its faults, its check: 0 or -errno. */
static int one_run(struct vm_run *run, struct vmm_reset_run *it,
		   const char *loop, unsigned int i)
{
	struct fl_stats s0, s1;
	char what[48];
	int ret;

	if ((ret = engine_stats(run, &s0)) < 0 ||
	    (ret = vm_run_once(run, &it->run_ms)) < 0 ||
	    (ret = engine_stats(run, &s1)) < 0)
		return ret;
	it->faults = s1.faults - s0.faults;
	snprintf(what, sizeof(what), "%s run %u: ", loop, i + 1);
	it->checksum_ok = vm_sums_ok(run, what);
	return 0;
}

static int reset(struct vm_run *run, struct vmm_reset_run *it,
		 unsigned int i)
{
	unsigned int flags = run->c->reset_eager ? FL_RESET_EAGER : 0;
	struct fl_stats s0, s1;
	double t0;
	int ret, n;

	if (run->c->skip_reset)
		return 0;
	if ((ret = engine_stats(run, &s0)) < 0)
		return ret;
	t0 = now();
	n = fl_engine_reset(run->mem.e, flags);
	it->before_ms = (now() - t0) * 1e3;
	if (n < 0)
		return vmm_fail(n, "the reset before run %u: %s", i + 1,
				fl_last_error());
	if ((ret = engine_stats(run, &s1)) < 0)
		return ret;
	it->pages_reset = (uint64_t)n;
	it->reset_runs = s1.reset_runs - s0.reset_runs;
	return 0;
}

int vmm_reset_loops(struct vm_run *run, struct vmm_result *r)
{
	struct vmm_reset_result *rs = &r->reset;
	unsigned int n = run->c->resets;
	bool ok = true;
	double t0;
	int ret;

	rs->runs = n;
	rs->tracking = run->mem.tracking;
	snprintf(rs->tracking_note, sizeof(rs->tracking_note), "%s",
		 run->mem.track_note);
	rs->reset = calloc(n, sizeof(*rs->reset));
	rs->fresh = calloc(n, sizeof(*rs->fresh));
	if (!rs->reset || !rs->fresh)
		return vmm_fail(-ENOMEM, "out of memory");

	for (unsigned int i = 0; i < n; i++) {
		struct vmm_reset_run *it = &rs->reset[i];

		if ((i > 0 && (ret = reset(run, it, i)) < 0) ||
		    (ret = one_run(run, it, "reset", i)) < 0)
			return ret;
		ok &= it->checksum_ok;
	}
	r->elapsed_ms = rs->reset[0].run_ms;
	if ((ret = engine_stats(run, &r->engine)) < 0)
		return ret;
	r->have_engine = true;
	rs->scan_ns = r->engine.reset_scan_ns;
	rs->drop_ns = r->engine.reset_drop_ns;
	rs->refill_ns = r->engine.reset_refill_ns;

	for (unsigned int i = 0; i < n; i++) {
		struct vmm_reset_run *it = &rs->fresh[i];

		t0 = now();
		ret = vmm_mem_renew(&run->mem, run->c);
		it->before_ms = (now() - t0) * 1e3;
		if (ret < 0 || (ret = one_run(run, it, "fresh", i)) < 0)
			return ret;
		ok &= it->checksum_ok;
	}
	r->checksum_ok = ok;
	return 0;
}
