/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm.h - `faultline vmm`: a minimal KVM VMM whose guest touches its
 * memory in a workload's pattern on 1-8 vCPUs and halts, with its memory
 * restored the ways a VMM restores a snapshot, and the guest's checksums
 * checked against the memory file; or run again and again from one
 * snapshot, the engine's reset in between (--reset).  Used by the
 * command, the kvm-restore benchmark, the demo and the tests.
 */
#ifndef FAULTLINE_VMM_H
#define FAULTLINE_VMM_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "error.h"
#include "faultline.h"

/* One run of `--reset`'s loops, and what came before it. */
struct vmm_reset_run {
	double before_ms;		/* the reset (0 before the first run),
					 * or the fresh restore */
	double run_ms;			/* as elapsed_ms, for this run */
	uint64_t pages_reset;		/* what the reset returned */
	uint64_t reset_runs;		/* the runs they made (engine stats) */
	uint64_t faults;		/* the engine's, during the run */
	bool checksum_ok;
};

/*
 * `--reset N`: N runs with the engine's reset before each but the first,
 * then N runs each after a fresh restore (the engine destroyed, the
 * memory mapped anew at the same address, a new engine started).
 */
struct vmm_reset_result {
	unsigned int runs;		/* N */
	uint64_t dirty_bytes;		/* each run writes */
	int tracking;			/* FL_TRACK_*; 0: none */
	char tracking_note[160];	/* none: why not */
	struct vmm_reset_run *reset;	/* N of them, malloc'd */
	struct vmm_reset_run *fresh;	/* N of them, malloc'd */
	uint64_t scan_ns, drop_ns, refill_ns;	/* the engine's, all resets */
};

struct vmm_result {
	bool kvm_guest;			/* false: a process guest */
	char kvm[96];			/* what KVM the machine has */
	double elapsed_ms;		/* first KVM_RUN to the last HLT */
	unsigned int vcpus;
	uint64_t mem_bytes;		/* guest memory */
	uint64_t touches;		/* pages touched, all vCPUs and passes */
	uint64_t faults;		/* host page faults of the vCPU threads */
	uint64_t bytes_copied;		/* resident in guest memory at the end */
	bool checksum_ok;
	bool have_engine;		/* VMM_INPROC: the engine's stats */
	struct fl_stats engine;		/* --reset: the reset loop's engine */
	struct vmm_reset_result reset;	/* --reset */
};

/* Parse "prepopulated|file|uffd|inproc"; -EINVAL if none. */
int vmm_backend_parse(const char *s, enum vmm_backend *out);
const char *vmm_backend_name(enum vmm_backend b);

/*
 * The options that do not go together, whatever the memory file: 0, or
 * -EINVAL with vmm_error() saying which (vmm_run() checks them too).
 */
int vmm_check_options(const struct vmm_config *c);
/*
 * Run the guest once (--reset: 2N times).  0 when it ran (r->checksum_ok
 * says whether every byte was right), -errno when it could not
 * (vmm_error() says why).  vmm_result_free() what r holds afterwards,
 * either way.
 */
int vmm_run(const struct vmm_config *c, struct vmm_result *r);
/* FL_TRACK_* as "wp_async", "wp_sync", or "none" (0). */
const char *vmm_tracking_name(int tracking);
/* Free what a result holds (--reset's runs); r may be reused. */
void vmm_result_free(struct vmm_result *r);
/* The result as one JSON object (malloc'd; free() it). */
char *vmm_result_json(const struct vmm_config *c, const struct vmm_result *r);

#endif
