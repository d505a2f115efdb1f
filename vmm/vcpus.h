/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vcpus.h - the state of one vmm_run() (vmm.c) and its vCPU threads
 * (vcpus.c): start them, run every vCPU once (again), check the sums a
 * run reported, stop them.  Internal to vmm/.
 */
#ifndef FAULTLINE_VMM_VCPUS_H
#define FAULTLINE_VMM_VCPUS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "beside.h"
#include "kvm.h"
#include "mem.h"
#include "vmm.h"

struct vm_run;

struct vcpu {
	struct vm_run *run;
	int id;
	struct vmm_slice s;
	struct kvm_vcpu kv;
	uint32_t sum[P_MAX_PASSES];	/* the guest's, last run */
	uint32_t want[P_MAX_PASSES];	/* the memory file's */
	double t_end;
	uint64_t faults;
	int err;
	pthread_t th;
};

struct vm_run {
	const struct vmm_config *c;	/* &mc once set up */
	struct vmm_config mc;		/* sizes resolved */
	unsigned int nvcpus, passes;
	bool kvm;
	struct kvm_vm vm;
	struct vmm_mem mem;
	struct vmm_beside beside;
	/* Each run: start, its passes (pass between two), done. */
	pthread_barrier_t start, pass, done;
	atomic_bool quit;		/* at start: no more runs */
	atomic_int err;
	struct vcpu v[VMM_MAX_VCPUS];
};

/* The guest's parameter block of v (guest_abi.h), no pass done. */
void vm_write_params(struct vm_run *run, const struct vcpu *v);
/*
 * A thread per vCPU (run->v[i].s and the VM set up), each waiting for
 * the first run; exits the process if one cannot start.
 */
void vm_vcpus_start(struct vm_run *run);
/*
 * Run every vCPU once (again: from its first instruction), all released
 * at one instant: 0, or the first error; *ms from that instant to the
 * last halt.
 */
int vm_run_once(struct vm_run *run, double *ms);
/*
 * Whether the sums of every vCPU's last run are the memory file's (want);
 * each one that is not is said on stderr, after what ("" or "run 3: ").
 */
bool vm_sums_ok(const struct vm_run *run, const char *what);
/* End the threads; the host page faults they took, every run. */
uint64_t vm_vcpus_stop(struct vm_run *run);

#endif
