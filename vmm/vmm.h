/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm.h - `faultline vmm`: a minimal KVM VMM whose guest touches its
 * memory in a workload's pattern on 1-8 vCPUs and halts, with its memory
 * restored the ways a VMM restores a snapshot, and the guest's checksums
 * checked against the memory file.  Used by the command, the kvm-restore
 * benchmark, the demo and the tests.
 */
#ifndef FAULTLINE_VMM_H
#define FAULTLINE_VMM_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "error.h"
#include "faultline.h"

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
	struct fl_stats engine;
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
 * Run the guest once.  0 when it ran (r->checksum_ok says whether every
 * byte was right), -errno when it could not (vmm_error() says why).
 */
int vmm_run(const struct vmm_config *c, struct vmm_result *r);
/* The result as one JSON object (malloc'd; free() it). */
char *vmm_result_json(const struct vmm_config *c, const struct vmm_result *r);

#endif
