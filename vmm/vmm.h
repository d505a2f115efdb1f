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

#include "faultline.h"
#include "workload.h"

#define VMM_MAX_VCPUS	8
#define VMM_MAX_MEM	(3ULL << 30)

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
	struct fl_stats engine;
};

/* Parse "prepopulated|file|uffd|inproc"; -EINVAL if none. */
int vmm_backend_parse(const char *s, enum vmm_backend *out);
const char *vmm_backend_name(enum vmm_backend b);

/*
 * Run the guest once.  0 when it ran (r->checksum_ok says whether every
 * byte was right), -errno when it could not (vmm_error() says why).
 */
int vmm_run(const struct vmm_config *c, struct vmm_result *r);
/* The result as one JSON object (malloc'd; free() it). */
char *vmm_result_json(const struct vmm_config *c, const struct vmm_result *r);

/* Why the last vmm_* call failed, in one line (from any thread). */
const char *vmm_error(void);
int vmm_fail(int ret, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
