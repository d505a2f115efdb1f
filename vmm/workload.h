/* SPDX-License-Identifier: Apache-2.0 */
/*
 * workload.h - the guest's workloads in C: parsing `--workload`, cutting
 * guest memory into one slice per vCPU, and the walk over a slice that
 * guest.S does, so that the VMM can compute from the memory file the sums
 * the guest must report, and a process guest (no /dev/kvm) can do the
 * same touches.
 */
#ifndef FAULTLINE_VMM_WORKLOAD_H
#define FAULTLINE_VMM_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "guest_abi.h"

struct vmm_workload {
	int kind;		/* WL_* */
	uint32_t stride;	/* WL_STRIDE: touch every stride-th page */
	uint32_t compute;	/* LCG steps of work after each touch */
	bool write;		/* touches are read-modify-writes */
};

/* One vCPU's share: the parameters guest.S reads (guest_abi.h). */
struct vmm_slice {
	uint32_t first;		/* index of the slice's first 4 KiB page */
	uint32_t npages;
	uint32_t kind, arg, seed;
	uint32_t compute;
	bool write;
};

/*
 * "linear", "random", "stride:N", "sparse", "sparse-random", "compute:N":
 * 0 or -EINVAL.
 */
int vmm_workload_parse(const char *spec, struct vmm_workload *w);
/* The spec back, for tables and JSON ("stride:4"). */
const char *vmm_workload_name(const struct vmm_workload *w, char *buf,
			      int len);

/*
 * Cut npages into nvcpus slices, each a multiple of 2 MiB but the last
 * (so hugetlb pages are shared by two vCPUs only at a remainder).
 */
void vmm_slices(const struct vmm_workload *w, uint32_t npages,
		unsigned int nvcpus, struct vmm_slice *out);

/* Pages a pass over the slice touches. */
uint64_t vmm_slice_touches(const struct vmm_slice *s);

/* Offset in guest memory of the word that touching slice page j reads. */
static inline uint64_t vmm_touch_offset(const struct vmm_slice *s,
					uint32_t j)
{
	uint32_t page = s->first + j;

	return (uint64_t)page * 4096 + 4 * (page & 1023);
}

/* A pass's checksum after one more touch that read the word v. */
static inline uint32_t vmm_sum_step(uint32_t sum, uint32_t v)
{
	return sum + v;
}

/*
 * Call fn(ctx, j) for each slice page j in the order guest.S touches them.
 * Inline so that the process guest's touch is not an indirect call.
 */
static inline void vmm_walk(const struct vmm_slice *s,
			    void (*fn)(void *ctx, uint32_t j), void *ctx)
{
	uint32_t j, x, left;

	switch (s->kind) {
	case WL_STRIDE:
		for (j = 0; j < s->npages; j += s->arg)
			fn(ctx, j);
		break;
	case WL_SPARSE:
		for (j = 0; j < s->npages; j++) {
			if ((j & (WL_SPARSE_EVERY - 1)) >= WL_SPARSE_RUN) {
				j |= WL_SPARSE_EVERY - 1;
				continue;
			}
			fn(ctx, j);
		}
		break;
	case WL_SPARSE_RANDOM:
		x = s->seed;
		for (left = s->arg + 1; left; left--) {
			x = (x * (uint32_t)WL_LCG_A + WL_LCG_C) & s->arg;
			for (j = x << WL_SPARSE_SHIFT;
			     j < (x << WL_SPARSE_SHIFT) + WL_SPARSE_RUN &&
			     j < s->npages; j++)
				fn(ctx, j);
		}
		break;
	case WL_RANDOM:
		x = s->seed;
		for (left = s->arg + 1; left; left--) {
			x = (x * (uint32_t)WL_LCG_A + WL_LCG_C) & s->arg;
			if (x < s->npages)
				fn(ctx, x);
		}
		break;
	default:
		for (j = 0; j < s->npages; j++)
			fn(ctx, j);
	}
}

#endif
