/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - what one run of the test VMM is asked to do (`faultline vmm`'s
 * options): shared by vmm.c and the backends, state only.
 */
#ifndef FAULTLINE_VMM_CONFIG_H
#define FAULTLINE_VMM_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "workload.h"

#define VMM_MAX_VCPUS	8
#define VMM_MAX_MEM	(3ULL << 30)
#define VMM_MAX_RESETS	10000
#define VMM_DIRTY_DEFAULT	(1ULL << 20)	/* or all of a smaller memory */

enum vmm_backend {
	VMM_PREPOPULATED,	/* read from the file before the first KVM_RUN */
	VMM_FILE,		/* MAP_PRIVATE of the file (Firecracker's File) */
	VMM_UFFD,		/* Firecracker's Uffd backend and handshake */
	VMM_INPROC,		/* the library engine inside the VMM */
};

enum vmm_guest {
	VMM_GUEST_AUTO,		/* KVM where /dev/kvm works, else a process */
	VMM_GUEST_KVM,
	VMM_GUEST_PROCESS,	/* threads of this process do the touches */
};

struct vmm_config {
	const char *mem_file;
	uint64_t mem_size;		/* 0: the file's size */
	enum vmm_backend backend;
	const char *socket;		/* VMM_UFFD: the handler's socket */
	bool huge;			/* 2 MiB hugetlb memory */
	unsigned int vcpus;		/* 0: 1 */
	struct vmm_workload wl;
	enum vmm_guest guest;
	/* Another thread copies the file once while the guest runs. */
	bool copy_beside;
	/* Balloon-style: madvise(DONTNEED) this range between two passes. */
	uint64_t discard_off, discard_len;
	/* VMM_INPROC: the engine's options. */
	uint64_t chunk;			/* 0: the default */
	unsigned int engine_flags;	/* FL_ENGINE_* */
	const char *replay;		/* a working-set trace to replay */
	/*
	 * VMM_INPROC: run the guest this many times from one snapshot, the
	 * engine's reset between two runs, then as many runs each from a
	 * fresh restore; each run reads the workload (checked against the
	 * snapshot) and writes the dirty set.  0: run once.
	 */
	unsigned int resets;
	uint64_t dirty;			/* bytes; 0: VMM_DIRTY_DEFAULT */
	enum vmm_dirty_pattern dirty_pattern;
	bool reset_eager;		/* FL_RESET_EAGER */
	/*
	 * Tests only: never reset (every run but the first must then fail
	 * its check, the snapshot's bytes having been written over).
	 */
	bool skip_reset;
};

#endif
